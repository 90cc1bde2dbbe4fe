"""One MaxText training step compiled ahead of time, in a process of its own: MaxText's own
``train_compile`` (``python -m maxtext.trainers.pre_train.train_compile``), for the TPU topology
its ``compile_topology`` names, or, with ``--cpu``, for XLA:CPU on four simulated devices (the
same step and state; the mesh made of CPU devices). XLA's dumps go where ``XLA_FLAGS`` says; the
compiled program's ``optimal_seconds`` (XLA's cost analysis) is printed as one JSON line.

:func:`snippets.hlo.field.compile_config` runs this module with ``[--cpu] BASE_YML KEY=VALUE
...``, MaxText's own arguments.
"""

from __future__ import annotations

import json
import sys

import jax
from jax.sharding import AxisType


def main(argv: list[str]) -> None:
    """Compile the step ``argv`` configures, printing ``{"optimal_seconds": ...}`` last."""
    cpu = argv[:1] == ["--cpu"]
    if cpu:
        jax.config.update("jax_num_cpu_devices", 4)
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
    train_compile.main(["train_compile", *argv[cpu:]])
    (costs,) = compiled_costs
    print(json.dumps({"optimal_seconds": costs.get("optimal_seconds")}))


if __name__ == "__main__":
    main(sys.argv[1:])
