"""One run of the check: each module read once, its sites found, each blocked site's status against
the baseline and the rules ignored, and the baseline entries no site matched."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Sequence

from find_barriers import _baseline as baseline
from find_barriers._dumps import Module, read_modules
from find_barriers._rules import PRICED as PRICED_RULES
from find_barriers._rules import rule_of
from find_barriers._sites import TransposeSite, find_sites
from find_barriers._vocabulary import Status, Verdict

PRICED = frozenset({Status.NEW, Status.ACCEPTED, Status.BELOW})
"""The statuses whose sites count toward a run's estimated cost: all but ignored."""


@dataclasses.dataclass(frozen=True)
class Finding:
    """A site and its status in the run (None for a site no ``Sharding`` call blocks)."""

    site: TransposeSite
    status: Status | None = None


@dataclasses.dataclass(frozen=True)
class Checked:
    """One module's sites, in the order :func:`~find_barriers.find_sites` gives, each as a
    :class:`Finding`."""

    module: Module
    findings: list[Finding]

    def accepting_all(self) -> Checked:
        """This module with every new blocked site accepted (a baseline was just written)."""
        return dataclasses.replace(
            self,
            findings=[
                Finding(f.site, Status.ACCEPTED) if f.status is Status.NEW else f
                for f in self.findings
            ],
        )

    @property
    def sites(self) -> list[TransposeSite]:
        """Every site, blocked or not."""
        return [finding.site for finding in self.findings]

    @property
    def counts(self) -> dict[Verdict, int]:
        """How many sites of each verdict."""
        return {v: sum(site.verdict is v for site in self.sites) for v in Verdict}

    @property
    def new(self) -> list[TransposeSite]:
        """The new blocked sites: what fails the check."""
        return [f.site for f in self.findings if f.status is Status.NEW]

    @property
    def estimated_cost(self) -> int:
        """The estimated cost of every blocked site not ignored, in bytes a step and device
        (a site of unknown cost counts nothing)."""
        return sum(
            f.site.cost.bytes
            for f in self.findings
            if f.site.cost is not None and f.status in PRICED
        )


@dataclasses.dataclass(frozen=True)
class Result:
    """A run of the check: each module as :class:`Checked`, and the stale baseline entries, those
    of a module read here that no blocked site matched (one per count; a rule ignored is not
    checked, so its entries are not stale)."""

    modules: list[Checked]
    stale: list[dict] = dataclasses.field(default_factory=list)
    baseline: str | None = None
    """The baseline file read, if any."""

    def accepting_all(self, baseline: str) -> Result:
        """Every new blocked site accepted, and nothing stale: ``baseline`` was just written."""
        return Result([item.accepting_all() for item in self.modules], [], baseline)

    @property
    def counted(self) -> list[Checked]:
        """The modules, each text once (a module dumped twice is counted once)."""
        return [item for item in self.modules if not item.module.same_as]


def check(
    paths: Sequence[str],
    pattern: str | None = None,
    baseline_file: str | None = None,
    ignored: frozenset[str] = frozenset(),
    path_map: Sequence[tuple[str, str]] = (),
    min_bytes: int = 1,
) -> Result:
    """Every module ``paths`` name (``pattern`` narrowing them), its sites, each blocked site's
    status: ignored (its rule is), accepted (the baseline file covers it), below (a weight
    gradient estimated to cost under ``min_bytes`` a step) or new; and what of the baseline is
    stale."""
    left = baseline.load(baseline_file) if baseline_file else Counter()
    checked = [
        check_module(module, left, ignored, min_bytes)
        for module in read_modules(paths, pattern, path_map)
    ]
    read = {item.module.name for item in checked}
    stale = [
        entry
        for text, count in sorted(left.items())
        if (entry := json.loads(text)).get("module") in read and entry.get("rule") not in ignored
        for _ in range(count)
    ]
    return Result(checked, stale, baseline_file)


def check_module(
    module: Module, left: Counter, ignored: frozenset[str] = frozenset(), min_bytes: int = 1
) -> Checked:
    """``module``'s sites, each blocked one's status as :func:`check` gives it; the baseline
    entries it matches are taken from ``left`` (entries by tag, with their counts)."""
    findings = []
    for site in [] if module.same_as else find_sites(module.program):
        rule = rule_of(site)
        status = None if rule is None else Status.IGNORED if rule.code in ignored else Status.NEW
        if status is Status.NEW and left[tag := baseline.tag(baseline.key(module, site))] > 0:
            left[tag] -= 1
            status = Status.ACCEPTED
        cost = site.cost if rule in PRICED_RULES else None
        if status is Status.NEW and cost is not None and cost.bytes < min_bytes:
            status = Status.BELOW
        findings.append(Finding(site, status))
    return Checked(module, findings)
