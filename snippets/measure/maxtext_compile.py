"""``python -m snippets maxtext_compile [--cpu] BASE_YML KEY=VALUE ...``: one MaxText training step
compiled ahead of time by MaxText's own ``train_compile``, for the TPU topology its
``compile_topology`` names or, with ``--cpu``, for XLA:CPU on four simulated devices (the same
step and state on a mesh of CPU devices). XLA's dumps go where ``XLA_FLAGS`` says; the compiled
program's ``optimal_seconds`` (XLA's cost analysis) is printed as JSON.

:func:`snippets.hlo.field.compile_config` runs it in a process of its own, one per compile.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import jax
from jax.sharding import AxisType

from snippets.support.cli import Parser, reported


def main(argv: Sequence[str] | None = None) -> None:
    """Compile the step the arguments configure; print ``{"optimal_seconds": ...}``."""
    parser = Parser(__doc__, json_help=None)
    parser.add_argument("--cpu", action="store_true", help="compile for XLA:CPU, 4 devices")
    parser.add_argument("base", help="MaxText's base config (its configs/base.yml)")
    parser.add_argument("overrides", nargs="*", help="MaxText's KEY=VALUE arguments")
    args = parser.parse_args(argv)
    with reported(args.debug):
        if args.cpu:
            jax.config.update("jax_num_cpu_devices", 4)
        costs = _compile(args.cpu, [args.base, *args.overrides])
    print(json.dumps({"optimal_seconds": costs.get("optimal_seconds")}))


def _compile(cpu: bool, arguments: list[str]) -> dict:
    """Run ``train_compile`` on ``arguments``; return the compiled step's cost analysis."""
    from maxtext.common.common_types import ShardMode  # noqa: PLC0415 - after the device count
    from maxtext.trainers.pre_train import train_compile  # noqa: PLC0415
    from maxtext.utils import maxtext_utils  # noqa: PLC0415

    compiled_costs = []
    compile_step = train_compile.jit_and_compile

    def recorded(*args, **kwargs):
        compiled = compile_step(*args, **kwargs)
        compiled_costs.append(compiled.cost_analysis() or {})
        return compiled

    def cpu_mesh(config):  # get_topology_mesh's own, on four CPU devices
        devices = maxtext_utils.create_device_mesh(config, jax.devices("cpu")[:4])
        kind = AxisType.Explicit if config.shard_mode == ShardMode.EXPLICIT else AxisType.Auto
        return jax.sharding.Mesh(devices, config.mesh_axes, axis_types=(kind,) * len(devices.shape))

    train_compile.jit_and_compile = recorded
    if cpu:
        train_compile.get_topology_mesh = cpu_mesh
    train_compile.main(["train_compile", *arguments])
    (costs,) = compiled_costs
    return costs
