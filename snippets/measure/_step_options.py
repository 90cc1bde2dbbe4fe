"""The command-line options of the commands that build the guides' step (``step_lowering``,
``barrier``): its sizes and mesh, with a check that the steps fit in memory."""

from __future__ import annotations

import argparse
from typing import Any

from snippets.lowering import MESH_AXES, StepConfig
from snippets.support.cli import check_memory, positive_int

SIZE_FIELDS = ("devices", "emb", "vocab", "batch", "seq")


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
