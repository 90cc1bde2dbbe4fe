"""``find-barriers``'s output: each module's sites with the user's line, the rule and the fix, as
text or as JSON (:data:`SCHEMA`, described by ``find_barriers.schema.json`` beside this file)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from find_barriers import __version__
from find_barriers.baseline import describe
from find_barriers.check import ACCEPTED, BELOW, IGNORED, NEW, VERDICTS, Result
from find_barriers.frames import readable
from find_barriers.rules import RULES, STALE_ENTRY, WEIGHT_GRADIENT, Rule, rule_of
from find_barriers.sites import BY_POSITION_NOTE, TransposeSite

SCHEMA = "find-barriers/4"
"""The JSON output's ``schema``: its name and version, raised when a field changes meaning."""


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


def costing(site: TransposeSite) -> str:
    """A blocked site's estimated cost in words, with the design doc's sections it follows:
    ``196.6 MB a step: 6 relayout copies (§4.3)``; unknown where its parameter is."""
    cost = site.cost
    if cost is None:
        return "cost unknown (no parameter to price)"
    if not cost.bytes:
        why = "summed with another gradient first" if "4.6" in cost.basis else "stacked in a loop"
        return f"no cost by the estimate: its gradient is {why} (§{cost.basis[0]})"
    parts = [f"{cost.relayout_copies} relayout copies (§4.3)"] * bool(cost.relayout_copies)
    parts += [f"{size(cost.lost_reduce_scatter_bytes)} lost to an all-reduce (§4.2)"] * bool(
        cost.lost_reduce_scatter_bytes
    )
    return f"estimated {size(cost.bytes)} a step: {', '.join(parts)}"


def fix(site: TransposeSite) -> str | None:
    """What to do about a site, in words with the page that shows it; why XLA keeps a kept
    transpose; None for a site that folds."""
    if site.verdict == "kept":
        return f"XLA keeps this transpose in either mode: {site.no_fold}"
    rule = rule_of(site)
    return None if rule is None else f"{rule.fix}. See {rule.url}"


def _listing_order(pair: tuple[TransposeSite, str | None]) -> tuple:
    """The text lists blocked sites first, those of unknown cost, then the costliest; then the
    rest in their order."""
    site = pair[0]
    cost = site.cost.bytes if site.cost is not None else None
    return (not site.blocked, cost is not None, -(cost or 0))


def site_lines(site: TransposeSite, status: str | None) -> list[str]:
    """A site's lines: its one line (labelled by its status if accepted, ignored or below the
    cost threshold); then, if blocked, what put the call there and, for a weight gradient, its
    estimated cost (:func:`fixes` says what to do, once a rule); if kept, why."""
    rule = rule_of(site)
    label = status if status in (ACCEPTED, IGNORED, BELOW) else site.verdict
    lines = [f"  {rule.code if rule else '':5} {site.one_line(label)}"]
    if rule is not None:
        placed = "an explicit mesh's type"
        if site.placed_by == "constraint":
            placed = f"your with_sharding_constraint at {readable(site.placed_at) or '?'}"
        priced = f"{costing(site)}; " if rule is WEIGHT_GRADIENT else ""
        lines.append(f"{'':16}{priced}Sharding call from {placed}")
    elif site.verdict == "kept":
        lines.append(f"{'':16}{fix(site)}")
    return lines


def summary(sites: Sequence[TransposeSite], statuses: Sequence[str | None] = ()) -> str:
    """``3 transpose-of-dot sites: 1 blocked (1 new), 2 foldable, 0 kept``: the statuses of the
    blocked ones in brackets, where given."""
    plural = "" if len(sites) == 1 else "s"
    counts = [f"{sum(s.verdict == v for s in sites)} {v}" for v in VERDICTS]
    if of_blocked := [
        f"{statuses.count(k)} {k}" for k in (NEW, ACCEPTED, IGNORED, BELOW) if k in statuses
    ]:
        counts[0] += f" ({', '.join(of_blocked)})"
    return f"{len(sites)} transpose-of-dot site{plural}: {', '.join(counts)}"


def total(result: Result) -> str:
    """The run in one line: modules, sites by verdict and status, stale entries, the estimated
    cost a step."""
    counted = result.counted
    sites = [site for item in counted for site in item.sites]
    statuses = [status for item in counted for _, status in item]
    cost = sum(item.estimated_cost for item in counted)
    line = f"{len(counted)} module{'' if len(counted) == 1 else 's'}: {summary(sites, statuses)}"
    if stale := len(result.stale):
        line += f"; {stale} stale baseline entr{'y' if stale == 1 else 'ies'}"
    return f"{line}; estimated cost {size(cost)} a step" if cost else line


def stale_lines(result: Result) -> list[str]:
    """Each stale baseline entry, as the text lists a finding."""
    return [f"  {STALE_ENTRY.code} stale     {describe(entry)}" for entry in result.stale]


def fixes(rules: Sequence[Rule]) -> list[str]:
    """What to do about each rule listed, once, in the rules' order, with the page that shows it."""
    return [f"{r.code} fix: {r.fix}. See {r.url}" for r in RULES.values() if r in rules]


def text(result: Result, shown: set[str], quiet: bool = False, verbose: bool = False) -> str:
    """The new blocked sites by module and those below the cost threshold, any stale baseline
    entries, each rule's fix once, then the run in one line (:func:`total`), as a linter reports; with ``verbose``, every site of
    each module whose path is in ``shown``; with ``quiet``, only the findings, one line each, as
    ruff writes them."""
    if quiet:
        findings = [
            f"{readable(site.user_line or site.source) or item.module.path}: "
            f"{rule.code} {rule.summary}: {site.what}, {site.chain}"
            + (f" (via {readable(site.via)})" if site.via else "")
            for item in result.modules
            for site in item.findings
            if (rule := rule_of(site))
        ]
        stale = [f"{result.baseline}: {STALE_ENTRY.code} {describe(e)}" for e in result.stale]
        return "\n".join(findings + stale)
    lines, listed_rules = [], []
    for item in result.modules:
        path, same_as = item.module.path, item.module.same_as
        if same_as:
            lines += [f"{path}: the same module as {same_as}, not counted again"] * verbose
            continue
        if verbose and path in shown:
            cost = item.estimated_cost
            priced = f"; estimated cost {size(cost)} a step" if cost else ""
            lines.append(f"{path}: {summary(item.sites, item.statuses)}{priced}")
            listed = sorted(item, key=_listing_order)
        elif reported := [(site, status) for site, status in item if status in (NEW, BELOW)]:
            counts = [f"{sum(s == k for _, s in reported)} {k}" for k in (NEW, BELOW)]
            lines.append(f"{path}: blocked sites: {', '.join(counts)}")
            listed = sorted(reported, key=_listing_order)
        else:
            continue
        lines += [line for site, status in listed for line in site_lines(site, status)]
        listed_rules += [rule for site, _ in listed if (rule := rule_of(site))]
    if result.stale:
        lines.append(f"{result.baseline}: {len(result.stale)} stale ({STALE_ENTRY.name})")
        lines += stale_lines(result)
        listed_rules.append(STALE_ENTRY)
    notes = [*fixes(listed_rules), *position_note(result, verbose)]
    return "\n".join([*lines, *notes, total(result)])


def position_note(result: Result, verbose: bool) -> list[str]:
    """One note where a site listed names its parameter only by a position."""
    listed = (
        site for item in result.modules for site in (item.sites if verbose else item.findings)
    )
    names = sorted({site.parameter for site in listed if site.parameter and site.by_position})
    shown = ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")
    return [f"note: {BY_POSITION_NOTE.format(names=shown)}"] if names else []


def record(site: TransposeSite, status: str | None) -> dict:
    """A site as JSON data: its fields, verdict, rule, lines, estimated cost, fix and status."""
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
        "by_position": site.by_position,
        "cost": site.cost and (dataclasses.asdict(site.cost) | {"basis": site.cost.links}),
        "fix": fix(site),
    }


def as_json(result: Result, exit_status: int) -> str:
    """Every module and its sites, and the stale baseline entries, as one JSON document of
    :data:`SCHEMA`."""
    modules = [
        {
            "file": item.module.path,
            "module": item.module.name,
            "same_as": item.module.same_as,
            "counts": item.counts,
            "estimated_cost": item.estimated_cost,
            "sites": [record(site, status) for site, status in item],
        }
        for item in result.modules
    ]
    counted = result.counted
    totals = {v: sum(item.counts[v] for item in counted) for v in VERDICTS} | {
        "new_blocked": sum(len(item.findings) for item in counted),
        "below": sum(status == BELOW for item in counted for _, status in item),
        "stale": len(result.stale),
        "estimated_cost": sum(item.estimated_cost for item in counted),
    }
    document = {"schema": SCHEMA, "version": __version__, "exit_status": exit_status}
    stale = {"baseline": result.baseline, "stale": result.stale}
    return json.dumps(document | {"modules": modules, "total": totals} | stale, indent=2)


def _escape(value: str, properties: bool = False) -> str:
    """A workflow command's data (with ``properties``, a property) escaped as GitHub reads it."""
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if properties else value


def message(site: TransposeSite) -> str:
    """A finding in one sentence, with its cost and fix: what annotations and SARIF results say."""
    priced = f" ({costing(site)})" if rule_of(site) is WEIGHT_GRADIENT else ""
    return f"Blocked fold: {site.what}, {site.chain}{priced}. Fix: {fix(site)}"


def place(module_path: str, site: TransposeSite) -> tuple[str, int | None]:
    """The file and line to annotate: the user's line, else the module's file."""
    frame = site.user_line or site.source
    shown = readable(frame)
    return (shown.rpartition(":")[0], frame.line) if frame and shown else (module_path, None)


def github(result: Result, strict: bool = False) -> str:
    """One ``::error`` workflow command per finding (``::notice`` below the cost threshold), at
    the user's line, titled by its rule; a ``::warning`` (``::error`` if ``strict``) per stale
    baseline entry, at the baseline file."""
    lines = []
    for item in result.modules:
        for site, status in item:
            if status not in (NEW, BELOW) or (rule := rule_of(site)) is None:
                continue
            file, line = place(item.module.path, site)
            where = f"file={_escape(file, True)}" + (f",line={line}" if line else "")
            title = _escape(f"find-barriers {rule.code} ({rule.name}): {item.module.name}", True)
            level = "error" if status == NEW else "notice"
            lines.append(f"::{level} {where},title={title}::{_escape(message(site))}")
    level = "error" if strict else "warning"
    title = _escape(f"find-barriers {STALE_ENTRY.code} ({STALE_ENTRY.name})", True)
    for entry in result.stale:
        text = _escape(f"{STALE_ENTRY.summary}: {describe(entry)}. Fix: {STALE_ENTRY.fix}")
        lines.append(f"::{level} file={_escape(result.baseline or '', True)},title={title}::{text}")
    return "\n".join(lines)
