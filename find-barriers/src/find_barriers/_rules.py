"""The kinds of finding, each a rule with an ID (``--ignore FB003``), a fix in words, and the page
section that shows it: a blocked site is one finding of exactly one rule."""

from __future__ import annotations

import dataclasses

from find_barriers._sites import TransposeSite
from find_barriers._vocabulary import Placement, Role

DOCS_URL = "https://shard-perf-docs.readthedocs.io/en/latest/"
"""The guides' Read the Docs address, set only here: every rule's help links into it."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """A kind of finding: its ID and name (as ruff writes them), what it means, what to do, and
    the guide section that shows the fix (a path under the guides' address)."""

    code: str
    name: str
    summary: str
    fix: str
    section: str

    @property
    def url(self) -> str:
        """The address of the section that fixes it."""
        return DOCS_URL + self.section


WEIGHT_GRADIENT = Rule(
    "FB001",
    "blocked-weight-gradient",
    "An explicit mesh's Sharding call blocks the fold of a weight gradient's transpose",
    "produce this weight gradient in the kernel's own order: run the layer's forward dot under "
    "jax.sharding.auto_axes, or give it a custom VJP whose weight-gradient dot writes the kernel",
    "guides/shard_mode_performance.html#fix-kernel-order",
)
CONSTRAINT = Rule(
    "FB002",
    "blocked-by-constraint",
    "Your with_sharding_constraint stands between a dot and its transpose",
    "move the constraint after the transpose (constrain the transposed value), or drop it",
    "guides/check_a_run.html#fix-own-constraint",
)
OTHER_FOLD = Rule(
    "FB003",
    "blocked-activation-fold",
    "An explicit mesh's Sharding call blocks a fold in a forward pass or an activation gradient",
    "no rewrite is known to pay here; measure whether this fold matters with the causal control "
    "(a one-device compile that keeps the Sharding calls)",
    "guides/maxtext_decoder.html#fix-activation-folds",
)
STALE_ENTRY = Rule(
    "FB004",
    "stale-baseline-entry",
    "A baseline entry matches no blocked site: the fold it accepted is fixed, or the site changed",
    "write the baseline again (--write-baseline FILE), so that a regression to the old site "
    "fails the check; --strict-baseline makes a stale entry fail it now",
    "guides/check_a_run.html#stale-baseline",
)
COSTLESS = Rule(
    "FB005",
    "blocked-weight-gradient-at-no-cost",
    "An explicit mesh's Sharding call blocks the fold of a weight gradient the estimate prices at "
    "nothing",
    "nothing to gain by the estimate (the gradient is summed with another or stacked in a loop "
    "before the optimizer reads it, TPU lays it out without a copy, or no output holds it); it "
    "passes unless --min-bytes is 0, and a TPU profile says whether it costs your step",
    "guides/check_a_run.html#estimated-cost",
)
RULES = {
    rule.code: rule for rule in (WEIGHT_GRADIENT, CONSTRAINT, OTHER_FOLD, STALE_ENTRY, COSTLESS)
}
"""Every rule, by ID."""
PRICED = frozenset({WEIGHT_GRADIENT, COSTLESS})
"""The rules of a weight gradient, whose findings carry the estimate of what they cost."""


def rule_of(site: TransposeSite) -> Rule | None:
    """The rule a site breaks: None unless a ``Sharding`` call blocks a fold XLA would make; a site
    whose role is unknown is taken as a weight gradient, never as a fold no rewrite pays for, and
    never as one that costs nothing."""
    if not site.blocked:
        return None
    if site.placed_by is Placement.CONSTRAINT:
        return CONSTRAINT
    if site.role in (Role.FORWARD, Role.ACTIVATION_GRADIENT):
        return OTHER_FOLD
    free = site.role is Role.WEIGHT_GRADIENT and site.cost is not None and not site.cost.bytes
    return COSTLESS if free else WEIGHT_GRADIENT


def parse_codes(text: str) -> set[str]:
    """Rule IDs from ``--ignore`` (comma-separated); a ValueError names an unknown one.

    >>> sorted(parse_codes("FB003,fb001"))
    ['FB001', 'FB003']
    """
    codes = {code.strip().upper() for code in text.split(",") if code.strip()}
    if unknown := sorted(codes - RULES.keys()):
        raise ValueError(
            f"--ignore {', '.join(unknown)}: no such rule; the rules are {', '.join(RULES)}"  # pragma: no mutate
        )
    return codes
