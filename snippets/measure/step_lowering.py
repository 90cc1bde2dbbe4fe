"""One lowering of the guides' step: its configuration and program sizes, or one program's text
(:func:`snippets.hlo.programs.lower_step` lowers and compiles it)."""

from __future__ import annotations

from collections.abc import Sequence

from snippets.devices import SHARD_MODES, setup_devices
from snippets.hlo.programs import lower_step
from snippets.lowering import DTYPES, VARIANTS
from snippets.measure._step_options import add_step_arguments, step_config
from snippets.support.cli import Parser, reported
from snippets.support.tables import print_report

PROGRAMS = ("stablehlo", "hlo", "compiled")


def main(argv: Sequence[str] | None = None) -> None:
    """Lower one step; print its configuration and program sizes, or one program's text."""
    parser = Parser(__doc__)
    add_step_arguments(parser)
    parser.add_argument("--mode", choices=tuple(SHARD_MODES), default="explicit")
    parser.add_argument("--variant", choices=VARIANTS, default="EV")
    parser.add_argument("--dtype", choices=DTYPES, default="float32")
    parser.add_argument("--show", choices=PROGRAMS, help="print this program's text instead")
    args = parser.parse_args(argv)
    if args.show and args.json:
        parser.error("--show prints a program's text, not JSON: drop --json or --show")
    with reported(args.debug):
        config = step_config(args, mode=args.mode, variant=args.variant, dtype=args.dtype)
        setup_devices(config.devices)
        lowered = lower_step(config)
    if args.show:
        print(getattr(lowered, args.show))
        return
    report = {
        "config": config.model_dump(),
        "mesh_shape": list(config.mesh_shape),
        "program_lines": {name: len(getattr(lowered, name).splitlines()) for name in PROGRAMS},
    }
    print_report(report, args.json)
