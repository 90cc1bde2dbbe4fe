"""The guides' step lowered and compiled: its three program texts and XLA's per-pass dumps, and the
command-line options every step command shares (``python -m snippets step_lowering``)."""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax

from snippets.devices import SHARD_MODES, setup_devices
from snippets.hlo.lowered import output_names
from snippets.lowering import DTYPES, MESH_AXES, VARIANTS, Step, StepConfig, build_step
from snippets.support.cli import Parser, SetupError, check_memory, positive_int, reported
from snippets.support.tables import print_report


@dataclasses.dataclass(frozen=True)
class LoweredStep:
    """The three program texts of one step: StableHLO, HLO before optimisation, compiled HLO."""

    config: StepConfig
    stablehlo: str
    hlo: str
    compiled: str
    dumps: dict[str, str]
    kernel_outputs: tuple[int, ...] = ()
    """Where the head kernel's gradient (or new value and Adam moments) sit in the outputs."""


def read_pass_dumps(directory: str) -> dict[str, str]:
    """The ``.txt`` files XLA wrote to ``directory`` (``xla_dump_to``), by name."""
    return {path.name: path.read_text() for path in Path(directory).glob("*.txt")}


def hlo_text(lowered: jax.stages.Lowered) -> str:
    """The lowered program's HLO text; JAX gives None for a backend without an HLO form."""
    if (module := lowered.compiler_ir("hlo")) is None:
        raise SetupError("this JAX backend gives no HLO module to read")
    return module.as_hlo_text()


def compiled_text(compiled: jax.stages.Compiled) -> str:
    """The compiled program's text; JAX gives None for a backend that cannot print it."""
    if (text := compiled.as_text()) is None:
        raise SetupError("this JAX backend cannot print a compiled program")
    return text


def lower_built(step: Step, dump_passes: bool = False) -> LoweredStep:
    """Lower and compile a built ``step``; with ``dump_passes`` also keep XLA's per-pass dumps."""
    lowered = step.lower()
    with tempfile.TemporaryDirectory() as directory:
        options = {"xla_dump_to": directory, "xla_dump_hlo_pass_re": ".*"} if dump_passes else None
        compiled = compiled_text(lowered.compile(compiler_options=options))
        dumps = read_pass_dumps(directory)  # none without dump_passes
    names = output_names(lowered)  # head.kernel, 0.mu.head.kernel (an Adam moment), 0.kernel
    kernel = tuple(i for i, name in enumerate(names) if name.endswith("kernel"))  # its only one
    return LoweredStep(step.config, lowered.as_text(), hlo_text(lowered), compiled, dumps, kernel)


def lower_step(config: StepConfig, dump_passes: bool = False) -> LoweredStep:
    """Build, lower and compile the step for ``config`` (see :func:`lower_built`)."""
    return lower_built(build_step(config), dump_passes)


SIZE_FIELDS = ("devices", "emb", "vocab", "batch", "seq")
PROGRAMS = ("stablehlo", "hlo", "compiled")


def add_step_arguments(parser: argparse.ArgumentParser) -> None:
    """Command-line options for a StepConfig's sizes and mesh, with its defaults."""
    defaults = StepConfig()
    for name in SIZE_FIELDS:
        parser.add_argument(f"--{name}", type=positive_int, default=getattr(defaults, name))
    parser.add_argument("--mesh", choices=tuple(MESH_AXES), default=defaults.mesh)


def step_config(args: argparse.Namespace, steps: int = 1, **fields: Any) -> StepConfig:
    """The StepConfig the options describe, once ``steps`` such steps are known to fit in memory."""
    sizes = {name: getattr(args, name) for name in SIZE_FIELDS}
    config = StepConfig(mesh=args.mesh, **sizes, **fields)
    flags = " ".join(f"--{name} {value}" for name, value in sizes.items())
    check_memory(steps * config.step_bytes, f"{steps} step(s) with {flags}")
    return config


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
