"""How the compiled LM-head step finishes the head kernel's gradient: its per-rank shape, its
collectives and the slices that cut its shard (on a TPU, the rule and the cost of that finish:
:mod:`snippets.collective_cost`)."""

from __future__ import annotations

import math

from find_barriers import array_shapes, elements
from snippets.devices import ShardMode
from snippets.hlo.collectives import collectives
from snippets.hlo.gradients import entry_at
from snippets.hlo.programs import lower_step
from snippets.lowering import MESH_AXES, MeshName, StepConfig


def lm_head_gradient_finish(mesh: MeshName, mode: ShardMode = "explicit") -> dict:
    """How the compiled LM-head step finishes the head kernel's gradient on ``mesh``: its per-rank
    shape, collectives, and the dynamic-slices that cut a shard of that size."""
    config = StepConfig(mesh=mesh, mode=mode)
    lowered = lower_step(config)
    comps, by_name, (output,) = entry_at(lowered.compiled, lowered.kernel_outputs)
    ((_, gradient),) = array_shapes(by_name[output].shape)
    slices = [
        inst.shape
        for insts in comps.values()
        for inst in insts
        if inst.opcode == "dynamic-slice" and elements(inst.shape) == math.prod(gradient)
    ]
    sharded = math.prod(gradient) < math.prod(config.kernel_dims)
    found = collectives(lowered.compiled)
    finish = (
        "reduce-scatter" if sharded and "reduce-scatter" in [c.kind for c in found]
        else "all-reduce + dynamic-slice" if sharded and slices
        else "all-reduce"
    )  # fmt: skip
    return {
        "mesh": mesh,
        "mesh_axes": dict(zip(MESH_AXES[mesh], config.mesh_shape, strict=True)),
        "kernel": list(config.kernel_dims),
        "gradient_per_rank": list(gradient),
        "gradient_sharded": sharded,
        "collectives": [{"kind": c.kind, "shape": c.shape, "ranks": c.ranks} for c in found],
        "gradient_shard_slices": len(slices),
        "gradient_shard_slice_shapes": slices,
        "finish": finish,
    }
