"""Sharded matmul over a split contraction: partial sums, reduce-scatter, all-reduce, all-gather.

The worked example of ``C = A @ B`` with ``A = [[1, 2], [3, 4]]`` and
``B = [[5, 6], [7, 8]]`` on two ranks, executed with ``shard_map`` on a
simulated mesh, generalised to N ranks, with the bytes each rank sends counted
twice: from the exchange schedule and from the compiled HLO.

Run ``python -m snippets.reduce_scatter [--ranks N] [--json]``.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.cli import Parser, check_memory, largest_fitting, positive_int, reported
from snippets.devices import SIMULATED_DEVICE_BYTES, make_mesh, setup_devices
from snippets.hlo import collectives, opcode_counts, without_metadata

SEED_A = np.array([[1, 2], [3, 4]], dtype=np.float32)
SEED_B = np.array([[5, 6], [7, 8]], dtype=np.float32)
AXIS = "k"
"""The mesh axis the contraction is split over."""

COLLECTIVE_KINDS = ("reduce-scatter", "all-gather", "all-reduce")


def _counts(**counts: object) -> None:
    """Raise unless every count is a whole number of at least 1, naming the first that is not."""
    for name, value in counts.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a whole number of at least 1, got {value!r}.")


def contraction_mesh(ranks: int) -> Mesh:
    """A one-axis mesh of ``ranks`` devices for the contracted dimension."""
    return make_mesh((ranks,), (AXIS,), "explicit")


def split_contraction(a: np.ndarray, b: np.ndarray, mesh: Mesh) -> tuple[jax.Array, jax.Array]:
    """Place column block r of ``a`` and row block r of ``b`` on rank r."""
    ranks = mesh.shape[AXIS]
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"A and B must be matrices, got shapes {a.shape} and {b.shape}.")
    (m, k), (k_b, _) = a.shape, b.shape
    if k != k_b:
        raise ValueError(
            f"A is {a.shape} and B is {b.shape}: the contracted sizes {k} and {k_b} differ."
        )
    if k % ranks or m % ranks:
        raise ValueError(
            f"A {a.shape} @ B {b.shape} on {ranks} ranks: the contracted size {k} and the output "
            f"rows {m} must both divide by {ranks} (rank r owns one block of each)."
        )
    return (
        jax.device_put(a, NamedSharding(mesh, P(None, AXIS))),
        jax.device_put(b, NamedSharding(mesh, P(AXIS, None))),
    )


def _on_ranks(body: Callable, mesh: Mesh, out_specs: P, check_vma: bool = True) -> Callable:
    """``body(a_block, b_block)`` run on every rank by ``shard_map``, jitted."""
    return jax.jit(
        shard_map(
            body,
            mesh=mesh,
            in_specs=(P(None, AXIS), P(AXIS, None)),
            out_specs=out_specs,
            check_vma=check_vma,
        )
    )


def local_products(mesh: Mesh) -> Callable:
    """Each rank's unfinished ``C_r = A[:, K_r] @ B[K_r, :]``, stacked along a leading rank axis."""
    return _on_ranks(lambda a, b: (a @ b)[None], mesh, P(AXIS))


def _finished_rows(a: jax.Array, b: jax.Array) -> jax.Array:
    """On one rank: the local product, summed across ranks, keeping this rank's row block."""
    return jax.lax.psum_scatter(a @ b, AXIS, scatter_dimension=0, tiled=True)


def reduce_scatter(mesh: Mesh) -> Callable:
    """Finish the sums and leave rank r with row block r of C."""
    return _on_ranks(_finished_rows, mesh, P(AXIS, None))


def all_reduce(mesh: Mesh) -> Callable:
    """Finish the sums and leave every rank with the whole of C."""
    return _on_ranks(lambda a, b: jax.lax.psum(a @ b, AXIS), mesh, P())


def reduce_scatter_then_all_gather(mesh: Mesh) -> Callable:
    """Reduce-scatter, then all-gather the finished rows: every rank holds C.

    The gathered value is the same on every rank, which shard_map cannot infer
    for ``all_gather``; ``check_vma=False`` states it.
    """
    return _on_ranks(
        lambda a, b: jax.lax.all_gather(_finished_rows(a, b), AXIS, tiled=True),
        mesh,
        P(),
        check_vma=False,
    )


def concatenate_partials(mesh: Mesh) -> Callable:
    """The wrong way: declare the unfinished products row-sharded, which concatenates them."""
    return _on_ranks(lambda a, b: a @ b, mesh, P(AXIS, None))


def per_rank(array: jax.Array, mesh: Mesh) -> list[np.ndarray]:
    """What each rank of ``mesh`` holds of ``array``, in rank order."""
    by_device = {shard.device: np.asarray(shard.data) for shard in array.addressable_shards}
    return [by_device[device] for device in mesh.devices.flat]


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One message of the exchange: which step, from whom, to whom, which rows, how many bytes."""

    step: str
    source: int
    target: int
    rows: tuple[int, int]
    bytes: int


def schedule(rows: int, cols: int, ranks: int, itemsize: int) -> list[Transfer]:
    """The direct exchange: rank r sends its partial rows owned by s (reduce-scatter), then its finished rows (all-gather)."""
    _counts(rows=rows, cols=cols, ranks=ranks, itemsize=itemsize)
    if rows % ranks:
        raise ValueError(f"rows {rows} must divide by ranks {ranks}: rank r owns one block.")
    block = rows // ranks
    size = block * cols * itemsize
    return [
        Transfer(step, source, target, (owner * block, (owner + 1) * block), size)
        for step in ("reduce-scatter", "all-gather")
        for source in range(ranks)
        for target in range(ranks)
        if source != target
        for owner in [target if step == "reduce-scatter" else source]
    ]


def schedule_bytes_per_rank(transfers: Sequence[Transfer], step: str) -> int:
    """Bytes rank 0 sends in ``step``; every rank sends the same, which is checked.

    One rank has nothing to exchange: no transfers, zero bytes.
    """
    sent: dict[int, int] = {}
    for t in transfers:
        if t.step == step:
            sent[t.source] = sent.get(t.source, 0) + t.bytes
    if not sent:
        return 0
    if len(set(sent.values())) != 1:
        raise AssertionError(f"ranks send unequal amounts in {step}: {sent}")
    return sent[0]


def hlo_bytes_per_rank(function: Callable, *args: jax.Array) -> dict[str, float]:
    """Bytes sent per rank by each kind of collective in ``function``'s compiled HLO (ring model)."""
    totals: dict[str, float] = dict.fromkeys(COLLECTIVE_KINDS, 0)
    for op in collectives(function.lower(*args).compile().as_text()):
        totals[op.kind] = totals.get(op.kind, 0) + op.bytes_per_rank
    return totals


def walkthrough(ranks: int = 2, a: np.ndarray = SEED_A, b: np.ndarray = SEED_B) -> dict:
    """Every step of the exchange for ``ranks`` ranks, with results, checks and byte counts.

    With one rank there is nothing to exchange: the collectives move zero bytes.
    """
    _counts(ranks=ranks)
    mesh = contraction_mesh(ranks)
    a_split, b_split = split_contraction(np.asarray(a), np.asarray(b), mesh)
    reference = np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)
    scattered = reduce_scatter(mesh)(a_split, b_split)
    gathered = reduce_scatter_then_all_gather(mesh)(a_split, b_split)
    concatenated = concatenate_partials(mesh)(a_split, b_split)
    transfers = schedule(a.shape[0], b.shape[1], ranks, np.dtype(a.dtype).itemsize)
    bytes_per_rank = {
        step: schedule_bytes_per_rank(transfers, step) for step in ("reduce-scatter", "all-gather")
    }
    hlo_bytes = hlo_bytes_per_rank(reduce_scatter_then_all_gather(mesh), a_split, b_split)
    hlo_bytes["all-reduce"] = hlo_bytes_per_rank(all_reduce(mesh), a_split, b_split)["all-reduce"]
    return {
        "ranks": ranks,
        "partials": [p[0].tolist() for p in per_rank(local_products(mesh)(a_split, b_split), mesh)],
        "shards": [s.tolist() for s in per_rank(scattered, mesh)],
        "all_reduced": [s.tolist() for s in per_rank(all_reduce(mesh)(a_split, b_split), mesh)],
        "gathered": [s.tolist() for s in per_rank(gathered, mesh)],
        "reference_equal": bool(np.array_equal(np.asarray(gathered), reference)),
        "concatenated_shape": list(concatenated.shape),
        "concatenated": np.asarray(concatenated).tolist(),
        "bytes_per_rank": {k.replace("-", "_"): v for k, v in bytes_per_rank.items()},
        "bytes_total": ranks * sum(bytes_per_rank.values()),
        "hlo_bytes_per_rank": {k.replace("-", "_"): v for k, v in hlo_bytes.items()},
        "transfers": [dataclasses.asdict(t) for t in transfers],
    }


def bytes_table(
    ranks: Sequence[int] = (2, 4, 8), rows: int = 8, inner: int = 8, cols: int = 2
) -> list[dict]:
    """Bytes per rank, from the schedule and from the HLO, for each rank count on random integers."""
    rng = np.random.default_rng(0)
    table = []
    for n in ranks:
        a = rng.integers(-9, 10, (rows, inner)).astype(np.float32)
        b = rng.integers(-9, 10, (inner, cols)).astype(np.float32)
        report = walkthrough(n, a, b)
        table.append(
            {
                "ranks": n,
                "C": f"{rows}x{cols} f32 ({rows * cols * 4} B)",
                "reduce_scatter_schedule": report["bytes_per_rank"]["reduce_scatter"],
                "reduce_scatter_hlo": report["hlo_bytes_per_rank"]["reduce_scatter"],
                "all_gather_schedule": report["bytes_per_rank"]["all_gather"],
                "all_gather_hlo": report["hlo_bytes_per_rank"]["all_gather"],
                "all_reduce_hlo": report["hlo_bytes_per_rank"]["all_reduce"],
                "exact": report["reference_equal"],
            }
        )
    return table


BYTES_TABLE_COLUMNS = {
    "ranks": "ranks",
    "C": "C",
    "reduce_scatter_schedule": "RS, schedule (B)",
    "reduce_scatter_hlo": "RS, HLO (B)",
    "all_gather_schedule": "AG, schedule (B)",
    "all_gather_hlo": "AG, HLO (B)",
    "all_reduce_hlo": "AR, HLO (B)",
    "exact": "exact",
}
"""Column titles for :func:`bytes_table` (RS reduce-scatter, AG all-gather, AR all-reduce)."""

FUSION_THRESHOLD_BYTES = 512
"""The per-shard minor-most extent below which, per the source PR, the TPU compiler will not
fuse all-reduce + dynamic-slice into a reduce-scatter (one 128-lane x 32-bit vreg row)."""


THRESHOLD_TABLE_COLUMNS = {
    "emb": "emb",
    "per_shard_elements": "per-shard minor extent (elements)",
    "per_shard_bytes": "bytes (f32)",
    "at_or_below_threshold": f"at or below ~{FUSION_THRESHOLD_BYTES} B",
}
"""Column titles for :func:`lm_head_threshold_table`."""


def lm_head_threshold_table(
    embs: Sequence[int] = (512, 1024, 2048, 4096), ranks: int = 4, itemsize: int = 4
) -> list[dict]:
    """Per-shard minor-most extent of the LM-head weight gradient ``[V, emb/ranks]`` against the threshold."""
    _counts(ranks=ranks, itemsize=itemsize)
    for emb in embs:
        _counts(emb=emb)
        if emb % ranks:
            raise ValueError(f"emb {emb} does not divide over {ranks} ranks; use a multiple.")
    return [
        {
            "emb": emb,
            "per_shard_elements": emb // ranks,
            "per_shard_bytes": emb // ranks * itemsize,
            "at_or_below_threshold": emb // ranks * itemsize <= FUSION_THRESHOLD_BYTES,
        }
        for emb in embs
    ]


def cpu_weight_gradient_collectives(
    ranks: int = 4, tokens: int = 16, emb: int = 8, vocab: int = 32
) -> dict:
    """Compile a data-parallel weight gradient whose result is row-sharded, and count what CPU emits.

    The partitioner writes this as all-reduce + dynamic-slice; a backend with a
    reduce-scatter creator pass turns the pair into one reduce-scatter.
    """
    _counts(ranks=ranks, tokens=tokens, emb=emb, vocab=vocab)
    if tokens % ranks or emb % ranks:
        raise ValueError(
            f"tokens {tokens} and emb {emb} must both divide by ranks {ranks}: the tokens are "
            "split over the ranks, and so are the gradient's rows."
        )
    mesh = make_mesh((ranks,), ("data",), "auto")
    x = jax.device_put(jnp.ones((tokens, emb)), NamedSharding(mesh, P("data")))
    g = jax.device_put(jnp.ones((tokens, vocab)), NamedSharding(mesh, P("data")))
    step = jax.jit(lambda x, g: x.T @ g, out_shardings=NamedSharding(mesh, P("data", None)))
    text = step.lower(x, g).compile().as_text()
    kinds = [op.kind for op in collectives(text)]
    return {
        "all-reduce": kinds.count("all-reduce"),
        "reduce-scatter": kinds.count("reduce-scatter"),
        "dynamic-slice": opcode_counts(text, "dynamic-slice")["dynamic-slice"],
        "hlo": "\n".join(
            without_metadata(line)
            for line in text.splitlines()
            if "all-reduce(" in line or "dynamic-slice(" in line
        ),
    }


def walkthrough_bytes(ranks: int) -> int:
    """Memory the walkthrough may need: a device per rank, 2 r (r - 1) transfers of ~1.5 KB."""
    return ranks * SIMULATED_DEVICE_BYTES + 4096 * ranks**2


def main(argv: Sequence[str] | None = None) -> None:
    """Print the walkthrough for ``--ranks`` ranks."""
    parser = Parser(__doc__)
    parser.add_argument("--ranks", type=positive_int, default=2, help="ranks (devices) to use")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    with reported(args.debug):
        check_memory(
            walkthrough_bytes(args.ranks),
            f"--ranks {args.ranks}",
            f"use at most --ranks {largest_fitting(walkthrough_bytes)}",
        )
        setup_devices(args.ranks)
        if args.ranks == 2:
            report = walkthrough()
        else:
            rows = 2 * args.ranks
            report = walkthrough(
                args.ranks,
                np.arange(rows * args.ranks, dtype=np.float32).reshape(rows, args.ranks),
                np.arange(args.ranks * 2, dtype=np.float32).reshape(args.ranks, 2),
            )
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for rank, (partial, shard, full) in enumerate(
        zip(report["partials"], report["shards"], report["gathered"], strict=True)
    ):
        print(f"rank {rank}: partial {partial}  reduce-scatter -> {shard}  all-gather -> {full}")
    print(f"equals the dense reference: {report['reference_equal']}")
    print(f"concatenating the partials instead gives shape {tuple(report['concatenated_shape'])}")
    print(f"bytes per rank (schedule): {report['bytes_per_rank']}; total {report['bytes_total']}")
    print(f"bytes per rank (HLO, ring model): {report['hlo_bytes_per_rank']}")


if __name__ == "__main__":
    main()
