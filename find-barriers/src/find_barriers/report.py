"""``find-barriers``'s output: each module's sites with the user's line, the rule and the fix, as
text or as JSON (:data:`SCHEMA`, described by ``find_barriers.schema.json`` beside this file)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from find_barriers import __version__
from find_barriers.check import ACCEPTED, IGNORED, VERDICTS, Checked
from find_barriers.frames import readable
from find_barriers.rules import rule_of
from find_barriers.sites import TransposeSite

SCHEMA = "find-barriers/3"
"""The JSON output's ``schema``: its name and version, raised when a field changes meaning."""


def size(nbytes: float) -> str:
    """Bytes for a reader.

    >>> size(512), size(6144), size(3 * 2**30)
    ('512 B', '6.0 KiB', '3.0 GiB')
    """
    if nbytes < 1024:
        return f"{nbytes:.0f} B"
    for unit in ("KiB", "MiB"):
        nbytes /= 1024
        if nbytes < 1024:
            return f"{nbytes:.1f} {unit}"
    return f"{nbytes / 1024:.1f} GiB"


def fix(site: TransposeSite) -> str | None:
    """What to do about a site, in words with the page that shows it; why XLA keeps a kept
    transpose; None for a site that folds."""
    if site.verdict == "kept":
        return f"XLA keeps this transpose in either mode: {site.no_fold}"
    rule = rule_of(site)
    return None if rule is None else f"{rule.fix}. See {rule.url}"


def _listing_order(pair: tuple[TransposeSite, str | None]) -> tuple:
    """The text lists blocked sites first, most bytes at stake per step first (unknown trip counts
    last), then the rest in their order."""
    site = pair[0]
    return (not site.blocked, site.bytes_per_step is None, -(site.bytes_per_step or 0))


def site_lines(site: TransposeSite, status: str | None) -> list[str]:
    """A site's lines: its one line (labelled by its status if accepted or ignored); then, if
    blocked, the bytes at stake, what put the call there and the fix; if kept, why."""
    rule = rule_of(site)
    label = status if status in (ACCEPTED, IGNORED) else site.verdict
    lines = [f"  {rule.code if rule else '':5} {site.one_line(label)}"]
    if rule is not None:
        per_step = "" if site.trips == 1 else f", {size(site.bytes_per_step or 0)} per step"
        unknown = ", per step unknown" if site.trips is None else per_step
        placed = "an explicit mesh's type"
        if site.placed_by == "constraint":
            placed = f"your with_sharding_constraint at {readable(site.placed_at) or '?'}"
        lines.append(f"{'':16}{size(site.bytes)} at stake{unknown}; Sharding call from {placed}")
        lines.append(f"{'':16}fix: {fix(site)}")
    elif site.verdict == "kept":
        lines.append(f"{'':16}{fix(site)}")
    return lines


def summary(sites: Sequence[TransposeSite]) -> str:
    """``3 transpose-of-dot sites: 1 blocked, 2 foldable, 0 kept``."""
    plural = "" if len(sites) == 1 else "s"
    counts = ", ".join(f"{sum(s.verdict == v for s in sites)} {v}" for v in VERDICTS)
    return f"{len(sites)} transpose-of-dot site{plural}: {counts}"


def text(checked: Sequence[Checked], shown: set[str], quiet: bool = False) -> str:
    """Per module whose path is in ``shown``, its summary and sites, then a total line for more
    than one module; with ``quiet``, only the findings, one line each, as ruff writes them."""
    if quiet:
        return "\n".join(
            f"{readable(site.user_line or site.source) or item.module.path}: "
            f"{rule.code} {rule.summary}: {site.what}, {site.chain}"
            + (f" (via {readable(site.via)})" if site.via else "")
            for item in checked
            for site in item.findings
            if (rule := rule_of(site))
        )
    lines = []
    for item in checked:
        path, same_as = item.module.path, item.module.same_as
        if same_as:
            lines.append(f"{path}: the same module as {same_as}, not counted again")
        elif path in shown:
            at_stake = item.bytes_at_stake
            stake = f"; {size(at_stake)} at stake per step" if at_stake else ""
            lines.append(f"{path}: {summary(item.sites)}{stake}")
            listed = sorted(item, key=_listing_order)
            lines += [line for site, status in listed for line in site_lines(site, status)]
    if len(checked) > 1:
        counted = [item for item in checked if not item.module.same_as]
        every = summary([site for item in counted for site in item.sites])
        total = size(sum(item.bytes_at_stake for item in counted))
        lines.append(f"total: {len(counted)} modules, {every}; {total} at stake per step")
    return "\n".join(lines)


def record(site: TransposeSite, status: str | None) -> dict:
    """A site as JSON data: its fields, verdict, rule, lines, bytes, fix and status."""
    rule = rule_of(site)
    frames = [
        {"file": (readable(f) or "").rpartition(":")[0], "line": f.line, "function": f.function}
        for f in site.user_stack
    ]
    return dataclasses.asdict(site) | {
        "verdict": site.verdict,
        "rule": rule and rule.code,
        "help_url": rule and rule.url,
        "status": status,
        "stack": [readable(frame) for frame in site.stack],
        "user_stack": frames,
        "user_line": readable(site.user_line or site.source),
        "via": readable(site.via),
        "placed_at": readable(site.placed_at),
        "bytes": site.bytes,
        "bytes_per_step": site.bytes_per_step,
        "fix": fix(site),
    }


def as_json(checked: Sequence[Checked], exit_status: int) -> str:
    """Every module and its sites as one JSON document of :data:`SCHEMA`."""
    modules = [
        {
            "file": item.module.path,
            "module": item.module.name,
            "same_as": item.module.same_as,
            "counts": item.counts,
            "bytes_at_stake": item.bytes_at_stake,
            "sites": [record(site, status) for site, status in item],
        }
        for item in checked
    ]
    counted = [item for item in checked if not item.module.same_as]
    total = {v: sum(item.counts[v] for item in counted) for v in VERDICTS} | {
        "new_blocked": sum(len(item.findings) for item in counted),
        "bytes_at_stake": sum(item.bytes_at_stake for item in counted),
    }
    document = {"schema": SCHEMA, "version": __version__, "exit_status": exit_status}
    return json.dumps(document | {"modules": modules, "total": total}, indent=2)


def _escape(value: str, properties: bool = False) -> str:
    """A workflow command's data (with ``properties``, a property) escaped as GitHub reads it."""
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if properties else value


def message(site: TransposeSite) -> str:
    """A finding in one sentence, with its fix: what annotations and SARIF results say."""
    return f"Blocked fold: {site.what}, {site.chain}. Fix: {fix(site)}"


def place(module_path: str, site: TransposeSite) -> tuple[str, int | None]:
    """The file and line to annotate: the user's line, else the module's file."""
    frame = site.user_line or site.source
    shown = readable(frame)
    return (shown.rpartition(":")[0], frame.line) if frame and shown else (module_path, None)


def github(checked: Sequence[Checked]) -> str:
    """One ``::error`` workflow command per finding, at the user's line, titled by its rule."""
    lines = []
    for item in checked:
        for site, rule in ((s, r) for s in item.findings if (r := rule_of(s))):
            file, line = place(item.module.path, site)
            where = f"file={_escape(file, True)}" + (f",line={line}" if line else "")
            title = _escape(f"find-barriers {rule.code} ({rule.name}): {item.module.name}", True)
            lines.append(f"::error {where},title={title}::{_escape(message(site))}")
    return "\n".join(lines)
