"""What a finishing collective costs: the ring model, priced for TPU v5p (the collectives are
timed on CPU by :mod:`snippets.measure.collective_timing`, ``python -m snippets collective_timing``)."""

from __future__ import annotations

from snippets.ring_model import ring_bytes_per_rank, ring_hops
from snippets.support.sources import TPU_V5P, Interconnect


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
