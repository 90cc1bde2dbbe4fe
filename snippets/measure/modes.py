"""What each shard mode lets you write: every capability check, run on an Explicit and an Auto mesh
(:func:`snippets.measure.mode_checks.outcomes.report`)."""

from __future__ import annotations

from collections.abc import Sequence

from snippets.devices import MESH_DEVICES, setup_devices
from snippets.measure.mode_checks.outcomes import report
from snippets.measure.mode_checks.registry import CHECKS
from snippets.support.cli import Parser, reported
from snippets.support.tables import print_report


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
