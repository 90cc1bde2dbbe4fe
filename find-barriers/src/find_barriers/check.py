"""One run of the check: each module read once, its sites found, each blocked site's status against
the baseline and the rules ignored, and the baseline entries no site matched."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Iterator, Sequence

from find_barriers import baseline
from find_barriers.dumps import Module, read_modules
from find_barriers.rules import WEIGHT_GRADIENT, rule_of
from find_barriers.sites import TransposeSite, find_sites

NEW, ACCEPTED, IGNORED, BELOW = "new", "accepted", "ignored", "below"
"""A blocked site's status: a finding, in the baseline, of a rule ``--ignore`` names, or a weight
gradient whose estimated cost is below ``--min-bytes`` (reported, not failing)."""
VERDICTS = ("blocked", "foldable", "kept")


@dataclasses.dataclass(frozen=True)
class Checked:
    """One module's sites, in the order :func:`~find_barriers.sites.find_sites` gives, each with
    its status (None for a site no ``Sharding`` call blocks)."""

    module: Module
    sites: list[TransposeSite]
    statuses: list[str | None]

    def __iter__(self) -> Iterator[tuple[TransposeSite, str | None]]:
        return iter(zip(self.sites, self.statuses, strict=True))

    def accepting_all(self) -> Checked:
        """This module with every new blocked site accepted (a baseline was just written)."""
        statuses = [ACCEPTED if status == NEW else status for status in self.statuses]
        return dataclasses.replace(self, statuses=statuses)

    @property
    def counts(self) -> dict[str, int]:
        """How many sites of each verdict."""
        return {v: sum(site.verdict == v for site in self.sites) for v in VERDICTS}

    @property
    def findings(self) -> list[TransposeSite]:
        """The new blocked sites: what fails the check."""
        return [site for site, status in self if status == NEW]

    @property
    def estimated_cost(self) -> int:
        """The estimated cost of every blocked site not ignored, in bytes a step and device
        (:mod:`~find_barriers.cost`; a site of unknown cost counts nothing)."""
        return sum(
            site.cost.bytes
            for site, status in self
            if site.cost is not None and status in (NEW, ACCEPTED, BELOW)
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
    min_bytes: int = 0,
) -> Result:
    """Every module ``paths`` name (``pattern`` narrowing them), its sites, each blocked site's
    status: ignored (its rule is), accepted (the baseline file covers it), below (a weight
    gradient estimated to cost under ``min_bytes`` a step) or new; and what of the baseline is
    stale."""
    left = baseline.load(baseline_file) if baseline_file else Counter()
    checked = []
    for module in read_modules(paths, pattern, path_map):
        sites = [] if module.same_as else find_sites(module.program)
        statuses: list[str | None] = []
        for site in sites:
            rule = rule_of(site)
            status = None if rule is None else IGNORED if rule.code in ignored else NEW
            if status == NEW and left[tag := baseline.tag(baseline.key(module, site))] > 0:
                left[tag] -= 1
                status = ACCEPTED
            cost = site.cost if rule is WEIGHT_GRADIENT else None
            if status == NEW and cost is not None and cost.bytes < min_bytes:
                status = BELOW
            statuses.append(status)
        checked.append(Checked(module, sites, statuses))
    read = {item.module.name for item in checked}
    stale = [
        entry
        for text, count in sorted(left.items())
        if (entry := json.loads(text)).get("module") in read and entry.get("rule") not in ignored
        for _ in range(count)
    ]
    return Result(checked, stale, baseline_file)
