"""What a finishing collective costs: the ring model, priced for TPU v5p, and the source's rule for
when a TPU fuses the LM head gradient's finish into a reduce-scatter (``python -m snippets
reduce_scatter --threshold`` and ``--cost-model`` print them; the collectives are timed on CPU by
:mod:`snippets.measure.collective_timing`, ``python -m snippets collective_timing``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from pydantic import validate_call

from find_barriers import DTYPE_BYTES
from snippets.ring_model import ring_bytes_per_rank, ring_hops
from snippets.sources import (
    BANDWIDTH_CASES,
    DESIGN_DOC_MEASURED,
    FUSION_THRESHOLD_BYTES,
    TPU_V5P,
    Interconnect,
)
from snippets.support.config import PositiveInt


def predict(kind: str, tensor_bytes: int, ranks: int, link: Interconnect = TPU_V5P) -> dict:
    """Bytes each rank sends, ring hops and modelled microseconds to reduce ``tensor_bytes``."""
    result_bytes = tensor_bytes // ranks if kind == "reduce-scatter" else tensor_bytes
    sent = ring_bytes_per_rank(kind, result_bytes, ranks)
    hops = ring_hops(kind, ranks)
    return {
        "bytes_per_rank": sent,
        "hops": hops,
        "latency_us": 1e6 * hops * link.hop_latency_s,
        "transfer_us": 1e6 * sent / link.link_bytes_per_s,
    }


FINISHES = ("reduce-scatter", "all-reduce + dynamic-slice")
"""The two ways to finish a weight gradient that each rank keeps a shard of."""


def finish_cost(finish: str, tensor_bytes: int, ranks: int, link: Interconnect = TPU_V5P) -> dict:
    """The model's time for one finish; the slice after an all-reduce reads and writes one shard."""
    if finish not in FINISHES:
        raise ValueError(f"Unknown finish {finish!r}; expected one of {FINISHES}.")
    if ranks < 2 or tensor_bytes % ranks:
        raise ValueError(
            f"{tensor_bytes} bytes over {ranks} ranks: the model needs at least 2 ranks and a "
            "tensor that divides evenly over them."
        )
    cost = predict(finish.split(" + ", maxsplit=1)[0], tensor_bytes, ranks, link)
    sliced = finish != "reduce-scatter"
    cost["slice_us"] = 1e6 * 2 * tensor_bytes // ranks / link.memory_bytes_per_s if sliced else 0.0
    cost["predicted_us"] = cost["latency_us"] + cost["transfer_us"] + cost["slice_us"]
    return cost


def fuses(per_shard_bytes: int) -> bool:
    """The source's rule: the fusion happens at :data:`~snippets.sources.FUSION_THRESHOLD_BYTES` per shard or more.

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
