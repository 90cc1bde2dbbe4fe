"""What every output format says of a site: its cost and fix in words, its one-sentence message,
and the file and line it belongs to."""

from __future__ import annotations

from find_barriers._frames import readable
from find_barriers._rules import PRICED, rule_of
from find_barriers._sites import TransposeSite
from find_barriers._vocabulary import Verdict


def size(nbytes: float) -> str:
    """Bytes for a reader, in decimal units as the design doc writes them.

    >>> size(512), size(6144), size(196_608_000), size(1_572_864_000)
    ('512 B', '6.1 kB', '196.6 MB', '1.57 GB')
    """
    if nbytes < 1000:
        return f"{nbytes:.0f} B"
    if nbytes < 1e6:
        return f"{nbytes / 1e3:.1f} kB"
    return f"{nbytes / 1e6:.1f} MB" if nbytes < 1e9 else f"{nbytes / 1e9:.2f} GB"


_FREE = {
    "4.6": "its gradient is summed with another gradient first",
    "4.7": "its gradient is stacked in a loop",
    "4.1": "TPU keeps the one of its dimensions that fills whole tiles minor-most",
    "4.3": "no output of the step holds its elements to copy",
}
"""Why a weight gradient costs nothing by the estimate, by the first section of its basis."""


def costing(site: TransposeSite) -> str:
    """A blocked site's estimated cost in words, with the design doc's sections it follows:
    ``196.6 MB a step: 6 relayout copies (§4.3)``; unknown where its parameter is."""
    cost = site.cost
    if cost is None:
        return "cost unknown (no parameter to price)"  # pragma: no mutate
    if not cost.bytes:
        return f"no cost by the estimate: {_FREE[cost.basis[0]]} (§{cost.basis[0]})"
    parts = [f"{cost.relayout_copies} relayout copies (§4.3)"] * bool(cost.relayout_copies)
    parts += [f"{size(cost.lost_reduce_scatter_bytes)} lost to an all-reduce (§4.2)"] * bool(
        cost.lost_reduce_scatter_bytes
    )
    return f"estimated {size(cost.bytes)} a step: {', '.join(parts)}"  # pragma: no mutate


def fix(site: TransposeSite) -> str | None:
    """What to do about a site, in words with the page that shows it; why XLA keeps a kept
    transpose; None for a site that folds."""
    if site.verdict is Verdict.KEPT:
        return f"XLA keeps this transpose in either mode: {site.no_fold}"  # pragma: no mutate
    rule = rule_of(site)
    return None if rule is None else f"{rule.fix}. See {rule.url}"


def message(site: TransposeSite) -> str:
    """A finding in one sentence, with its cost and fix: what annotations and SARIF results say."""
    priced = f" ({costing(site)})" if rule_of(site) in PRICED else ""  # pragma: no mutate
    kind = "Pinned layout" if site.verdict is Verdict.PINNED else "Blocked fold"
    return f"{kind}: {site.what}, {site.chain}{priced}. Fix: {fix(site)}"  # pragma: no mutate


def place(module_path: str, site: TransposeSite) -> tuple[str, int | None]:
    """The file and line to annotate: the user's line, else the module's file."""
    frame = site.user_line or site.source
    shown = readable(frame)
    return (shown.rpartition(":")[0], frame.line) if frame and shown else (module_path, None)
