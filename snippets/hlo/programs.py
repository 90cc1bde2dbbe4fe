"""A step's programs as XLA sees them, for the readers: lowered and compiled, its three program
texts (StableHLO, HLO before optimisation, compiled HLO) and XLA's per-pass dumps."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import jax

from find_barriers.jax import output_names
from snippets.lowering import Step, StepConfig, build_step
from snippets.support.cli import SetupError


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
