"""How the LM head's weight gradient is finished, when a TPU fuses the finish, and what it costs
(``python -m snippets reduce_scatter --threshold`` and ``--cost-model`` print them)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from pydantic import validate_call

from find_barriers.shapes import DTYPE_BYTES, array_shapes, elements
from snippets.collective_cost import FINISHES, finish_cost, predict
from snippets.devices import ShardMode
from snippets.hlo.collectives import collectives
from snippets.hlo.gradients import entry_at
from snippets.lowering import MESH_AXES, MeshName, StepConfig
from snippets.measure.step_lowering import lower_step
from snippets.support.config import PositiveInt
from snippets.support.sources import (
    BANDWIDTH_CASES,
    DESIGN_DOC_MEASURED,
    FUSION_THRESHOLD_BYTES,
    TPU_V5P,
    Interconnect,
)


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


def fuses(per_shard_bytes: int) -> bool:
    """The source's rule: the fusion happens at :data:`~snippets.support.sources.FUSION_THRESHOLD_BYTES` per shard or more.

    >>> fuses(256), fuses(512)
    (False, True)
    """
    return per_shard_bytes >= FUSION_THRESHOLD_BYTES


def itemsize(dtype: str) -> int:
    """Bytes per element of an HLO element type such as ``bf16``."""
    if dtype not in DTYPE_BYTES:
        raise ValueError(f"Unknown dtype {dtype!r}; use an HLO name such as bf16 or f32.")
    return DTYPE_BYTES[dtype]


@validate_call
def lm_head_threshold_table(
    *,
    embs: Sequence[PositiveInt] = (512, 1024, 2048, 4096),
    dtypes: Sequence[str] = ("bf16", "f32"),
    shards: Sequence[PositiveInt] = (2, 4, 8),
) -> list[dict]:
    """The rule for the ``[vocab, emb]`` gradient: a shard's minor-most extent is ``emb / shards``."""
    if bad := [(emb, n) for emb in embs for n in shards if emb % n]:
        raise ValueError(f"emb {bad[0][0]} does not divide over {bad[0][1]} shards.")
    return [
        {"emb": emb, "dtype": dtype, "shards": n, "per_shard_bytes": size, "fuses": fuses(size)}
        for dtype, emb, n in itertools.product(dtypes, embs, shards)
        for size in [emb // n * itemsize(dtype)]
    ]


def threshold_report() -> dict:
    """The fusion rule and its table, as ``python -m snippets reduce_scatter --threshold`` has them."""
    return {
        "threshold_bytes": FUSION_THRESHOLD_BYTES,
        "rule": f"fuses == (per_shard_bytes >= {FUSION_THRESHOLD_BYTES})",
        "source": "the source PR (TPU v5p): the all-reduce to dynamic-slice fusion is rejected "
        "when the per-shard minor-most extent is below ~512 bytes, independent of dtype",
        "rows": lm_head_threshold_table(),
    }


def lm_head_gradient_costs(
    vocab: int = 32000,
    embs: Sequence[int] = (512, 4096),
    shards: int = 4,
    dtypes: Sequence[str] = ("bf16", "f32"),
    link: Interconnect = TPU_V5P,
) -> list[dict]:
    """Modelled time of each finish of the ``[vocab, emb]`` gradient, and its ratio to RS."""
    rows = []
    for emb, dtype in itertools.product(embs, dtypes):
        size = vocab * emb * itemsize(dtype)
        costs = {finish: finish_cost(finish, size, shards, link) for finish in FINISHES}
        for finish, cost in costs.items():
            ratio = cost["predicted_us"] / costs["reduce-scatter"]["predicted_us"]
            gradient = {"emb": emb, "dtype": dtype, "shards": shards, "gradient_bytes": size}
            rows.append(gradient | {"collective": finish, **cost, "ratio_to_reduce_scatter": ratio})
    return rows


def design_doc_comparison(
    vocab: int = 32000, emb: int = 512, shards: int = 4, dtype: str = "bf16"
) -> list[dict]:
    """Each collective's time as the design doc measured it (bytes over its bandwidth) for the doc's
    gradient (the defaults), and modelled: the collective alone, without the slice."""
    size = vocab * emb * itemsize(dtype)
    rows = []
    for kind, (slowest, fastest) in DESIGN_DOC_MEASURED.items():
        costs = {case: predict(kind, size, shards, link) for case, link in BANDWIDTH_CASES.items()}
        sent = costs["one-way"]["bytes_per_rank"]
        row = {"collective": kind, "bytes_per_rank": sent}
        row |= {"measured_us_min": 1e6 * sent / fastest, "measured_us_max": 1e6 * sent / slowest}
        row |= {f"model_us_{case}": c["latency_us"] + c["transfer_us"] for case, c in costs.items()}
        rows.append(row)
    return rows


def cost_model_report() -> dict:
    """The TPU v5p cost model of the finish, for each link bandwidth case (one-way, bidirectional)."""
    return {
        "model": "ring collective: hops x hop latency + bytes sent per rank / link bandwidth, "
        "plus reading and writing one shard for the slice; a model, not a measurement",
        "interconnect": TPU_V5P.name,
        "hop_latency_us": 1e6 * TPU_V5P.hop_latency_s,
        "latency_source": TPU_V5P.latency_source,
        "memory_bytes_per_s": TPU_V5P.memory_bytes_per_s,
        "memory_source": TPU_V5P.memory_source,
        "bandwidth_cases": {
            case: {
                "bandwidth_bytes_per_s": link.link_bytes_per_s,
                "source": link.link_source,
                "rows": lm_head_gradient_costs(link=link),
            }
            for case, link in BANDWIDTH_CASES.items()
        },
        "design_doc_measured": {
            "source": "MaxText's design doc docs/guides/optimization/shard_mode_performance.md, "
            "in open PR https://github.com/AI-Hypercomputer/maxtext/pull/5091, section 4.2",
            "rows": design_doc_comparison(),
        },
    }
