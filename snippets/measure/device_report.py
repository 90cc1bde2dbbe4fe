"""The devices the guides run on, as a report (``python -m snippets device_report``)."""

from __future__ import annotations

from collections.abc import Sequence

from snippets.devices import MESH_DEVICES, describe_devices, setup_devices
from snippets.support.cli import Parser, positive_int, reported
from snippets.support.tables import print_report


def main(argv: Sequence[str] | None = None) -> None:
    """Print which devices the guides would run on."""
    parser = Parser(__doc__)
    parser.add_argument(
        "--devices", type=positive_int, default=MESH_DEVICES, help="devices to set up"
    )
    args = parser.parse_args(argv)
    with reported(args.debug):
        setup_devices(args.devices)
    print_report(describe_devices(), args.json)
