"""What each shard mode lets you write: every capability check, run on an Explicit and an Auto mesh.

Each check (:mod:`snippets.measure.mode_checks`) gives ``ok``, what it read, or its whole error
(:mod:`snippets.support.outcomes`) in each mode: a release that changes one shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from snippets.devices import MESH_DEVICES, SHARD_MODES, setup_devices
from snippets.measure.mode_checks.registry import CHECKS, ISOLATED
from snippets.support.cli import Parser, reported
from snippets.support.outcomes import isolated_outcome, outcome
from snippets.support.results import shared
from snippets.support.tables import print_report


@shared
def report(names: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
    """``{name: {"explicit": outcome, "auto": outcome}}`` for the named checks (default: all)."""
    return {
        name: {
            mode: (isolated_outcome if name in ISOLATED else outcome)(CHECKS[name], axis_type)
            for mode, axis_type in SHARD_MODES.items()
        }
        for name in names or CHECKS
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Print every check's outcome in both modes."""
    parser = Parser(__doc__)
    parser.add_argument(
        "--check", action="append", choices=sorted(CHECKS), metavar="NAME", help="run only NAME"
    )
    args = parser.parse_args(argv)
    with reported(args.debug):
        setup_devices(MESH_DEVICES)
    print_report(report(args.check), args.json)
