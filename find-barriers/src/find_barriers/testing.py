"""Gate a step in a test: :func:`assert_no_blocked_folds` fails, as a pytest assertion does,
where a ``Sharding`` call blocks a fold of a lowered step that no baseline entry accepts; the
same gate as ``find-barriers`` on the step's dump. It needs ``pip install "find-barriers[jax]"``.

With find-barriers installed, pytest has the fixture ``assert_no_blocked_folds``: this function
with the baseline and cost threshold the project's pytest configuration names
(``find_barriers_baseline``, ``find_barriers_min_bytes``)."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

from find_barriers import _baseline
from find_barriers._check import Checked, Finding, check_module
from find_barriers._dumps import Module
from find_barriers._formats.text import fixes, site_lines
from find_barriers._rules import parse_codes, rule_of
from find_barriers._stablehlo import StableHLOProgram
from find_barriers._vocabulary import Status
from find_barriers.jax import _named, output_names

if TYPE_CHECKING:
    import jax

__all__ = ["assert_no_blocked_folds", "write_baseline"]


def _checked(
    lowered: jax.stages.Lowered, left: Counter, ignore: Iterable[str], min_bytes: int
) -> Checked:
    """``lowered`` checked as the command line checks a module, outputs named as in the step."""
    program = StableHLOProgram(lowered.compiler_ir())
    checked = check_module(
        Module(f"<lowered {program.name}>", program),
        left,
        frozenset(parse_codes(",".join(ignore))),
        min_bytes,
    )
    names = output_names(lowered)
    findings = [Finding(_named(f.site, names), f.status) for f in checked.findings]
    return dataclasses.replace(checked, findings=findings)


def assert_no_blocked_folds(
    lowered: jax.stages.Lowered,
    baseline: str | os.PathLike[str] | None = None,
    *,
    min_bytes: int = 1,
    ignore: Iterable[str] = (),
) -> None:
    """Fail where ``lowered`` (``jax.jit(step).lower(...)``) has a new blocked site, as
    ``find-barriers --baseline BASELINE --min-bytes N --ignore RULE`` on its dump would.

    Args:
        lowered: the lowered training step.
        baseline: a file of accepted sites (:func:`write_baseline`, or ``--write-baseline``).
        min_bytes: fail on a blocked weight gradient only if its estimated cost is this many
            bytes a step or more; the default, 1, passes one priced at nothing (FB005).
        ignore: rule IDs not to fail on (``"FB003"``).

    Raises:
        AssertionError: listing each new blocked site as ``find-barriers`` prints it, then each
            rule's fix.
        ValueError: a baseline file that is missing or not a baseline; an unknown rule ID.
    """
    __tracebackhide__ = True  # pytest shows the test's line, not this one
    left = _baseline.load(os.fspath(baseline)) if baseline is not None else Counter()
    checked = _checked(lowered, left, ignore, min_bytes)
    new = [finding for finding in checked.findings if finding.status is Status.NEW]
    if new:
        rules = [rule for finding in new if (rule := rule_of(finding.site))]
        plural = "" if len(new) == 1 else "s"
        lines = [f"{checked.module.name}: {len(new)} new blocked site{plural}"]
        lines += [line for finding in new for line in site_lines(finding)]
        raise AssertionError("\n".join([*lines, *fixes(rules)]))


def write_baseline(lowered: jax.stages.Lowered, path: str | os.PathLike[str]) -> None:
    """Record ``lowered``'s blocked sites in ``path``, so that :func:`assert_no_blocked_folds`
    with ``baseline=path`` fails only on new ones."""
    checked = _checked(lowered, Counter(), (), 0)
    _baseline.write(
        os.fspath(path), [(checked.module, site) for site in checked.sites if site.blocked]
    )
