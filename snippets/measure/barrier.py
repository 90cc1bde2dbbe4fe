"""The HLO barrier, measured: every (shard mode x head variant) lowered and read.

:func:`snippets.hlo.barrier.barrier_report`, and the causal control (CPU), printed."""

from __future__ import annotations

from collections.abc import Sequence

from snippets.devices import setup_devices
from snippets.hlo.barrier import barrier_report
from snippets.hlo.causal_control import causal_control
from snippets.lowering import OPTIMIZERS
from snippets.measure._step_options import add_step_arguments, step_config
from snippets.support.cli import Parser, reported
from snippets.support.tables import print_report


def main(argv: Sequence[str] | None = None) -> None:
    """Print the barrier report."""
    parser = Parser(__doc__)
    add_step_arguments(parser)
    parser.add_argument(
        "--optimizer", choices=OPTIMIZERS, default="none", help="add AdamW; count its relayouts"
    )
    args = parser.parse_args(argv)
    with reported(args.debug):
        base = step_config(args, steps=2, optimizer=args.optimizer)
        setup_devices(base.devices)
        report = barrier_report(base)
        report["causal_control"] = causal_control(base.replace(optimizer="none"))
    print_report(report, args.json)
