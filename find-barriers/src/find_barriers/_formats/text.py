"""``--format text``: the new blocked sites by module as a linter lists them, each rule's fix
once, and the run in one line; ``--quiet`` one line a finding, ``--verbose`` every site."""

from __future__ import annotations

from collections.abc import Sequence

from find_barriers._baseline import describe
from find_barriers._check import Finding, Result
from find_barriers._formats.options import Options
from find_barriers._formats.wording import costing, fix, size
from find_barriers._frames import readable
from find_barriers._rules import PRICED, RULES, STALE_ENTRY, Rule, rule_of
from find_barriers._sites import BY_POSITION_NOTE, TransposeSite
from find_barriers._vocabulary import Placement, Status, Verdict

LISTED = (Status.NEW, Status.BELOW)
"""The statuses the text lists without ``--verbose``."""


def _listing_order(finding: Finding) -> tuple:
    """The text lists blocked sites first, those of unknown cost, then the costliest; then the
    rest in their order."""
    site = finding.site
    cost = site.cost.bytes if site.cost is not None else None
    return (not site.blocked, cost is not None, -(cost or 0))


def site_lines(finding: Finding) -> list[str]:
    """A site's lines: its one line (labelled by its status if accepted, ignored or below the
    cost threshold); then, if blocked, what put the call there and, for a weight gradient, its
    estimated cost (:func:`fixes` says what to do, once a rule); if kept, why."""
    site, status = finding.site, finding.status
    rule = rule_of(site)
    label = status if status not in (None, Status.NEW) else site.verdict
    lines = [f"  {rule.code if rule else '':5} {site.one_line(label)}"]
    if rule is not None:
        placed = "an explicit mesh's type"  # pragma: no mutate
        if site.placed_by is Placement.CONSTRAINT:
            placed = f"your with_sharding_constraint at {readable(site.placed_at) or '?'}"
        priced = f"{costing(site)}; " if rule in PRICED else ""  # pragma: no mutate
        lines.append(f"{'':16}{priced}Sharding call from {placed}")  # pragma: no mutate
    elif site.verdict is Verdict.KEPT:
        lines.append(f"{'':16}{fix(site)}")  # pragma: no mutate
    return lines


def summary(findings: Sequence[Finding]) -> str:
    """``3 transpose-of-dot sites: 1 blocked (1 new), 2 foldable, 0 kept``: the statuses of the
    blocked and pinned ones in brackets, after the pinned count where any is."""
    plural = "" if len(findings) == 1 else "s"  # pragma: no mutate
    tally = {v: sum(f.site.verdict is v for f in findings) for v in Verdict}
    counts = [f"{n} {v}" for v, n in tally.items() if n or v is not Verdict.PINNED]
    statuses = [f.status for f in findings]
    if of_blocked := [f"{statuses.count(k)} {k}" for k in Status if k in statuses]:
        counts[1 if tally[Verdict.PINNED] else 0] += f" ({', '.join(of_blocked)})"
    return f"{len(findings)} transpose-of-dot site{plural}: {', '.join(counts)}"


def total(result: Result) -> str:
    """The run in one line: modules, sites by verdict and status, stale entries, the estimated
    cost a step."""
    counted = result.counted
    findings = [finding for item in counted for finding in item.findings]
    cost = sum(item.estimated_cost for item in counted)
    line = f"{len(counted)} module{'' if len(counted) == 1 else 's'}: {summary(findings)}"
    if stale := len(result.stale):
        line += f"; {stale} stale baseline entr{'y' if stale == 1 else 'ies'}"  # pragma: no mutate
    return f"{line}; estimated cost {size(cost)} a step" if cost else line  # pragma: no mutate


def fixes(rules: Sequence[Rule]) -> list[str]:
    """What to do about each rule listed, once, in the rules' order, with the page that shows it."""
    return [f"{r.code} fix: {r.fix}. See {r.url}" for r in RULES.values() if r in rules]


def quiet_lines(result: Result) -> list[str]:
    """Only the new findings and stale entries, one line each, as ruff writes them."""
    findings = [
        f"{readable(site.user_line or site.source) or item.module.path}: "
        f"{rule.code} {rule.summary}: {site.what}, {site.chain}"
        + (f" (via {readable(site.via)})" if site.via else "")
        for item in result.modules
        for site in item.new
        if (rule := rule_of(site))
    ]
    return findings + [f"{result.baseline}: {STALE_ENTRY.code} {describe(e)}" for e in result.stale]


def emit(result: Result, options: Options) -> str:
    """The new blocked sites by module and those below the cost threshold, any stale baseline
    entries, each rule's fix once, then the run in one line (:func:`total`), as a linter reports;
    with ``verbose``, every site of each module whose path is ``shown``; with ``quiet``, only the
    findings (:func:`quiet_lines`)."""
    if options.quiet:
        return "\n".join(quiet_lines(result))
    lines, listed_rules = [], []
    for item in result.modules:
        path, same_as = item.module.path, item.module.same_as
        if same_as:
            lines += [f"{path}: the same module as {same_as}, not counted again"] * options.verbose
            continue
        if options.verbose and path in options.shown:
            cost = item.estimated_cost
            priced = f"; estimated cost {size(cost)} a step" if cost else ""  # pragma: no mutate
            lines.append(f"{path}: {summary(item.findings)}{priced}")  # pragma: no mutate
            listed = sorted(item.findings, key=_listing_order)
        elif reported := [f for f in item.findings if f.status in LISTED]:
            counts = [f"{sum(f.status is k for f in reported)} {k}" for k in LISTED]
            lines.append(f"{path}: blocked sites: {', '.join(counts)}")  # pragma: no mutate
            listed = sorted(reported, key=_listing_order)
        else:
            continue
        lines += [line for finding in listed for line in site_lines(finding)]
        listed_rules += [rule for f in listed if (rule := rule_of(f.site))]
    if result.stale:
        lines.append(f"{result.baseline}: {len(result.stale)} stale ({STALE_ENTRY.name})")
        lines += [f"  {STALE_ENTRY.code} stale     {describe(entry)}" for entry in result.stale]
        listed_rules.append(STALE_ENTRY)
    notes = [*fixes(listed_rules), *position_note(result, options.verbose)]
    return "\n".join([*lines, *notes, total(result)])


def position_note(result: Result, verbose: bool) -> list[str]:
    """One note where a site listed names its parameter only by a position."""
    listed: list[TransposeSite] = [
        site for item in result.modules for site in (item.sites if verbose else item.new)
    ]
    names = sorted({site.parameter for site in listed if site.parameter and site.by_position})
    shown = ", ".join(names[:2]) + (", ..." if len(names) > 2 else "")  # pragma: no mutate
    return [f"note: {BY_POSITION_NOTE.format(names=shown)}"] if names else []  # pragma: no mutate
