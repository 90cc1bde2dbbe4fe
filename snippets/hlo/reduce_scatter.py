"""Reduce-scatter step by step: the lesson's 2x2 exchange on N ranks, its bytes counted twice (the
schedule's messages, and the collectives of the compiled program)."""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh
from pydantic import validate_call

from snippets import exchange
from snippets.hlo.collectives import collectives
from snippets.hlo.counts import opcode_counts
from snippets.hlo.programs import compiled_text
from snippets.support.config import PositiveInt

STEPS = ("reduce-scatter", "all-gather")
"""The two steps of the direct exchange: finish the partial rows, then hand the rows out."""


@validate_call
def schedule(
    *, rows: PositiveInt, cols: PositiveInt, ranks: PositiveInt, itemsize: PositiveInt
) -> list[dict]:
    """The direct exchange, one message each: partial rows to their owners, then finished rows."""
    if rows % ranks:
        raise ValueError(f"rows {rows} must divide by ranks {ranks}: rank r owns one block.")
    block = rows // ranks
    return [
        {
            "step": step,
            "source": source,
            "target": target,
            "rows": (owner * block, (owner + 1) * block),
            "bytes": block * cols * itemsize,
        }
        for step in STEPS
        for source in range(ranks)
        for target in range(ranks)
        if source != target
        for owner in [target if step == "reduce-scatter" else source]
    ]


def schedule_bytes_per_rank(messages: Sequence[dict], step: str) -> int:
    """Bytes rank 0 sends in ``step`` (every rank sends as much); zero with one rank."""
    return sum(m["bytes"] for m in messages if m["step"] == step and m["source"] == 0)


def hlo_bytes_per_rank(function: jax.stages.Wrapped, *args: jax.Array) -> dict[str, float]:
    """Bytes sent per rank by each collective in ``function``'s compiled HLO (ring model)."""
    totals: dict[str, float] = dict.fromkeys(("reduce_scatter", "all_gather", "all_reduce"), 0)
    for op in collectives(compiled_text(function.lower(*args).compile())):
        totals[op.kind.replace("-", "_")] += op.bytes_per_rank
    return totals


FINISH_OPCODES = ("reduce-scatter", "all-reduce", "all-gather", "dynamic-slice")
"""The opcodes that show how a compiled program finishes partial sums."""


def compiled_collectives(function: jax.stages.Wrapped, *args: jax.Array) -> dict[str, int]:
    """How many of each :data:`FINISH_OPCODES` the compiled ``function`` has."""
    return opcode_counts(compiled_text(function.lower(*args).compile()), *FINISH_OPCODES)


def explicit_mode(a: jax.Array, b: jax.Array, mesh: Mesh) -> dict:
    """The exchange without ``shard_map`` (and :func:`~snippets.exchange.reduce_scatter`'s form):
    its results and the collectives each form compiles to."""
    with jax.set_mesh(mesh):
        unreduced = jax.jit(exchange.partial_sums)(a, b)
        rows = jax.jit(exchange.finish_by_reshard)(a, b)
        compiled = {
            name: compiled_collectives(jax.jit(form), a, b)
            for name, form in exchange.EXPLICIT_FORMS.items()
        }
    compiled["shard_map_psum_scatter"] = compiled_collectives(exchange.reduce_scatter(mesh), a, b)
    return {
        "unreduced_type": str(jax.typeof(unreduced)),
        "unreduced_partials": [p.tolist() for p in exchange.per_rank(unreduced, mesh)],
        "resharded_type": str(jax.typeof(rows)),
        "resharded": np.asarray(rows).tolist(),
        "compiled_collectives": compiled,
    }


def walkthrough(
    ranks: int = 2,
    a: np.ndarray = exchange.SEED_A,
    b: np.ndarray = exchange.SEED_B,
    explicit: bool = True,
) -> dict:
    """Every step of the exchange on ``ranks`` ranks, with results, checks and byte counts;
    ``explicit=False`` leaves out :func:`explicit_mode` (it needs JAX 0.12)."""
    messages = schedule(rows=a.shape[0], cols=b.shape[1], ranks=ranks, itemsize=a.dtype.itemsize)
    mesh = exchange.contraction_mesh(ranks)
    blocks = exchange.split_contraction(a, b, mesh)

    def on_ranks(array: jax.Array) -> list[list]:
        return [r.tolist() for r in exchange.per_rank(array, mesh)]

    gather, all_reduce = exchange.reduce_scatter_then_all_gather(mesh), exchange.all_reduce(mesh)
    gathered = gather(*blocks)
    concatenated = np.asarray(exchange.concatenate_partials(mesh)(*blocks))
    sent = {step: schedule_bytes_per_rank(messages, step) for step in STEPS}
    hlo_bytes = hlo_bytes_per_rank(gather, *blocks)
    hlo_bytes["all_reduce"] = hlo_bytes_per_rank(all_reduce, *blocks)["all_reduce"]
    return {
        "ranks": ranks,
        "partials": [p[0] for p in on_ranks(exchange.local_products(mesh)(*blocks))],
        "shards": on_ranks(exchange.reduce_scatter(mesh)(*blocks)),
        "all_reduced": on_ranks(all_reduce(*blocks)),
        "gathered": on_ranks(gathered),
        "reference_equal": bool(np.array_equal(np.asarray(gathered), a.astype(float) @ b)),
        "concatenated_shape": list(concatenated.shape),
        "concatenated": concatenated.tolist(),
        "bytes_per_rank": {step.replace("-", "_"): n for step, n in sent.items()},
        "bytes_total": ranks * sum(sent.values()),
        "hlo_bytes_per_rank": hlo_bytes,
        "transfers": messages,
    } | ({"explicit_mode": explicit_mode(*blocks, mesh)} if explicit else {})
