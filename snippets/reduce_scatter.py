"""Sharded matmul over a split contraction: partial sums, reduce-scatter, all-reduce, all-gather.

The worked example of ``C = A @ B`` with ``A = [[1, 2], [3, 4]]`` and
``B = [[5, 6], [7, 8]]`` on two ranks, executed with ``shard_map`` on a
simulated mesh, generalised to N ranks, with the bytes each rank sends counted
twice: from the exchange schedule and from the compiled HLO.

The same exchange is also written in sharding-in-types (an unreduced
``jnp.dot`` finished by ``reshard``), the fusion threshold the source reports
for the TPU is tabulated, and the LM-head step's gradient finish is read from
its compiled collectives on a data-parallel and an fsdp mesh.

Run ``python -m snippets.reduce_scatter [--ranks N | --threshold | --cost-model] [--json]``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.barrier import run_report
from snippets.cli import Parser, check_memory, largest_fitting, positive_int, reported, run_module
from snippets.collective_cost import (
    BANDWIDTH_CASES,
    COST_COLUMNS,
    DESIGN_DOC,
    TPU_V5P,
    cost_table_rows,
    design_doc_comparison,
    lm_head_gradient_costs,
)
from snippets.devices import SIMULATED_DEVICE_BYTES, make_mesh, setup_devices
from snippets.hlo import (
    DTYPE_BYTES,
    array_shapes,
    collectives,
    computations,
    instructions,
    opcode_counts,
    without_metadata,
)
from snippets.lowering import MESH_LAYOUTS, StepConfig, lower_step

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


def partial_sums(a: jax.Array, b: jax.Array) -> jax.Array:
    """The local products as one *unreduced* array: JAX's type for the lesson's C_0 and C_1."""
    return jnp.dot(a, b, out_sharding=P(None, None, unreduced={AXIS}))


def finish_by_reshard(a: jax.Array, b: jax.Array) -> jax.Array:
    """Finish the unreduced partial sums into row ownership with ``reshard``."""
    return jax.sharding.reshard(partial_sums(a, b), P(AXIS, None))


def rows_in_one_dot(a: jax.Array, b: jax.Array) -> jax.Array:
    """Ask the dot itself for finished, row-owned output: both steps at once."""
    return jnp.dot(a, b, out_sharding=P(AXIS, None))


EXPLICIT_FORMS = {
    "dot_unreduced": partial_sums,
    "dot_unreduced_then_reshard": finish_by_reshard,
    "dot_out_sharding_rows": rows_in_one_dot,
}
"""The sharding-in-types forms of the exchange, each jitted under the explicit mesh."""

FINISH_OPCODES = ("reduce-scatter", "all-reduce", "all-gather", "dynamic-slice")
"""The opcodes that show how a compiled program finishes partial sums."""

FORM_TITLES = {
    "dot_unreduced": 'jnp.dot(a, b, out_sharding=P(None, None, unreduced={"k"}))',
    "dot_unreduced_then_reshard": 'jax.sharding.reshard(partials, P("k", None))',
    "dot_out_sharding_rows": 'jnp.dot(a, b, out_sharding=P("k", None))',
    "shard_map_psum_scatter": 'shard_map: jax.lax.psum_scatter(a @ b, "k", ...)',
}
"""How each form of :func:`explicit_mode` is written, for a table."""


def finish_ops(counts: dict[str, int]) -> str:
    """The opcodes a :func:`compiled_collectives` count found: ``1 all-reduce + 1 dynamic-slice``.

    >>> finish_ops({"reduce-scatter": 0, "all-reduce": 1, "dynamic-slice": 1})
    '1 all-reduce + 1 dynamic-slice'
    >>> finish_ops({"all-reduce": 0})
    'none'
    """
    return " + ".join(f"{n} {opcode}" for opcode, n in counts.items() if n) or "none"


def compiled_collectives(function: Callable, *args: jax.Array) -> dict[str, int]:
    """How many of each :data:`FINISH_OPCODES` the compiled ``function`` has."""
    return opcode_counts(function.lower(*args).compile().as_text(), *FINISH_OPCODES)


def explicit_mode(a: jax.Array, b: jax.Array, mesh: Mesh) -> dict:
    """The exchange without ``shard_map``: unreduced partials, finished rows, compiled ops per form.

    ``shard_map_psum_scatter`` is the :func:`reduce_scatter` form, for comparison.
    """
    with jax.set_mesh(mesh):
        unreduced = jax.jit(partial_sums)(a, b)
        rows = jax.jit(finish_by_reshard)(a, b)
        compiled = {
            name: compiled_collectives(jax.jit(form), a, b) for name, form in EXPLICIT_FORMS.items()
        }
    compiled["shard_map_psum_scatter"] = compiled_collectives(reduce_scatter(mesh), a, b)
    return {
        "unreduced_type": str(jax.typeof(unreduced)),
        "unreduced_partials": [p.tolist() for p in per_rank(unreduced, mesh)],
        "resharded_type": str(jax.typeof(rows)),
        "resharded": np.asarray(rows).tolist(),
        "compiled_collectives": compiled,
    }


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
    """The direct exchange: partial rows to their owners (reduce-scatter), then finished rows."""
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
    """Bytes sent per rank by each collective in ``function``'s compiled HLO (ring model)."""
    totals: dict[str, float] = dict.fromkeys(COLLECTIVE_KINDS, 0)
    for op in collectives(function.lower(*args).compile().as_text()):
        totals[op.kind] = totals.get(op.kind, 0) + op.bytes_per_rank
    return totals


def walkthrough(
    ranks: int = 2, a: np.ndarray = SEED_A, b: np.ndarray = SEED_B, explicit: bool = True
) -> dict:
    """Every step of the exchange for ``ranks`` ranks, with results, checks and byte counts.

    With one rank there is nothing to exchange: the collectives move zero bytes.
    ``explicit=False`` leaves out :func:`explicit_mode`, whose ``unreduced``
    partial sums need a JAX that has them (0.12).
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
    } | ({"explicit_mode": explicit_mode(a_split, b_split, mesh)} if explicit else {})


def bytes_table(
    ranks: Sequence[int] = (2, 4, 8), rows: int = 8, inner: int = 8, cols: int = 2
) -> list[dict]:
    """Bytes per rank, from the schedule and the HLO, for each rank count on random integers."""
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
"""Per the source PR, the TPU compiler rejects fusing all-reduce + dynamic-slice into a
reduce-scatter when the per-shard minor-most extent is below ~512 bytes (one 128-lane x 32-bit
vreg row), independent of dtype. :func:`fuses` is that rule; the ``~`` is the source's."""

THRESHOLD_EMBS = (512, 1024, 2048, 4096)
THRESHOLD_DTYPES = ("bf16", "f32")
THRESHOLD_SHARDS = (2, 4, 8)


def fuses(per_shard_bytes: int) -> bool:
    """The source's rule: the fusion happens at :data:`FUSION_THRESHOLD_BYTES` per shard or more.

    >>> fuses(256), fuses(512)
    (False, True)
    """
    return per_shard_bytes >= FUSION_THRESHOLD_BYTES


def lm_head_threshold_table(
    embs: Sequence[int] = THRESHOLD_EMBS,
    dtypes: Sequence[str] = THRESHOLD_DTYPES,
    shards: Sequence[int] = THRESHOLD_SHARDS,
) -> list[dict]:
    """Per-shard bytes of the ``[V, emb/shards]`` weight gradient's minor-most extent, and the rule.

    The gradient materialises as ``[vocab, emb]`` with ``emb`` split over the
    shards, so a shard's minor-most extent is ``emb / shards`` elements.
    """
    for dtype in dtypes:
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"Unknown dtype {dtype!r}; use an HLO name such as bf16 or f32.")
    for n in shards:
        _counts(shards=n)
        for emb in embs:
            _counts(emb=emb)
            if emb % n:
                raise ValueError(f"emb {emb} does not divide over {n} shards; use a multiple.")
    return [
        {
            "emb": emb,
            "dtype": dtype,
            "shards": n,
            "per_shard_bytes": emb // n * DTYPE_BYTES[dtype],
            "fuses": fuses(emb // n * DTYPE_BYTES[dtype]),
        }
        for dtype in dtypes
        for emb in embs
        for n in shards
    ]


def threshold_grid(rows: Sequence[dict]) -> list[dict]:
    """One line per (dtype, emb), one column per shard count: bytes, and whether it fuses.

    A shard exactly at the threshold is marked, since that is where the rule's
    ``>=`` (the source's "below ~512 bytes" is rejected) decides.
    """
    grid: dict[tuple[str, int], dict] = {}
    for row in rows:
        line = grid.setdefault(
            (row["dtype"], row["emb"]), {"dtype": row["dtype"], "emb": row["emb"]}
        )
        verdict = "fuses" if row["fuses"] else "**no**"
        edge = " (boundary)" if row["per_shard_bytes"] == FUSION_THRESHOLD_BYTES else ""
        line[f"{row['shards']} shards"] = f"{row['per_shard_bytes']} B, {verdict}{edge}"
    return list(grid.values())


def cpu_weight_gradient_collectives(
    ranks: int = 4, tokens: int = 16, emb: int = 8, vocab: int = 32
) -> dict:
    """Compile a data-parallel weight gradient with row-sharded result; count what the CPU emits.

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


def lm_head_gradient_finish(mesh: str, mode: str = "explicit") -> dict:
    """How the LM-head step's compiled program finishes the head kernel's gradient on ``mesh``.

    Reads the kernel gradient's per-rank shape from the compiled step's outputs,
    its collectives, and the dynamic-slices that cut a gradient shard out of a
    full all-reduced gradient (what a reduce-scatter would do in one step).
    """
    config = StepConfig(mesh=mesh, mode=mode)
    lowered = lower_step(config)
    comps, entry, root = computations(lowered.compiled)
    by_name = {inst.name: inst for inst in comps[entry]}
    (position,) = lowered.kernel_outputs
    ((_, gradient),) = array_shapes(by_name[by_name[root].operands[position]].shape)
    shard_elements = math.prod(gradient)
    slices = [
        inst.shape
        for inst in instructions(lowered.compiled)
        if inst.opcode == "dynamic-slice"
        and math.prod(array_shapes(inst.shape)[0][1]) == shard_elements
    ]
    sharded = shard_elements < math.prod(config.kernel_dims)
    found = run_report(lowered)["collectives"]
    kinds = [c["kind"] for c in found]
    finish = (
        "reduce-scatter" if sharded and "reduce-scatter" in kinds
        else "all-reduce + dynamic-slice" if sharded and slices
        else "all-reduce"
    )  # fmt: skip
    return {
        "mesh": mesh,
        "mesh_axes": dict(zip(MESH_LAYOUTS[mesh], config.mesh_shape, strict=True)),
        "kernel": list(config.kernel_dims),
        "gradient_per_rank": list(gradient),
        "gradient_sharded": sharded,
        "collectives": [{key: c[key] for key in ("kind", "shape", "ranks")} for c in found],
        "gradient_shard_slices": len(slices),
        "gradient_shard_slice_shapes": slices,
        "finish": finish,
    }


def walkthrough_bytes(ranks: int) -> int:
    """Memory the walkthrough may need: a device per rank, 2 r (r - 1) transfers of ~1.5 KB."""
    return ranks * SIMULATED_DEVICE_BYTES + 4096 * ranks**2


def threshold_report() -> dict:
    """The fusion rule and its table, as ``--threshold`` prints them."""
    return {
        "threshold_bytes": FUSION_THRESHOLD_BYTES,
        "rule": f"fuses == (per_shard_bytes >= {FUSION_THRESHOLD_BYTES})",
        "source": "the source PR (TPU v5p): the all-reduce to dynamic-slice fusion is rejected "
        "when the per-shard minor-most extent is below ~512 bytes, independent of dtype",
        "rows": lm_head_threshold_table(),
    }


def cost_model_report() -> dict:
    """The TPU v5p cost model of the LM-head gradient's finish, as ``--cost-model`` prints it.

    The top-level bandwidth and rows are the one-way case; ``bandwidth_cases`` holds
    both cases, each with its source, and ``design_doc_measured`` the TPU measurement
    the model is compared with.
    """
    link = TPU_V5P
    return {
        "model": "ring collective: hops x hop latency + bytes sent per rank / link bandwidth, "
        "plus reading and writing one shard for the slice; a model, not a measurement",
        "interconnect": link.name,
        "bandwidth_bytes_per_s": link.link_bytes_per_s,
        "bandwidth_source": link.link_source,
        "hop_latency_us": 1e6 * link.hop_latency_s,
        "latency_source": link.latency_source,
        "memory_bytes_per_s": link.memory_bytes_per_s,
        "memory_source": link.memory_source,
        "rows": lm_head_gradient_costs(link=link),
        "bandwidth_cases": {
            case: {
                "bandwidth_bytes_per_s": case_link.link_bytes_per_s,
                "source": case_link.link_source,
                "rows": lm_head_gradient_costs(link=case_link),
            }
            for case, case_link in BANDWIDTH_CASES.items()
        },
        "design_doc_measured": {
            "source": f"{DESIGN_DOC}, section 4.2",
            "rows": design_doc_comparison(),
        },
    }


def walkthrough_report(ranks: int) -> dict:
    """The walkthrough for ``ranks``: the lesson's matrices on 2 ranks, integer ranges otherwise."""
    check_memory(
        walkthrough_bytes(ranks),
        f"--ranks {ranks}",
        f"use at most --ranks {largest_fitting(walkthrough_bytes)}",
    )
    setup_devices(ranks)
    if ranks == 2:
        return walkthrough()
    rows = 2 * ranks
    return walkthrough(
        ranks,
        np.arange(rows * ranks, dtype=np.float32).reshape(rows, ranks),
        np.arange(ranks * 2, dtype=np.float32).reshape(ranks, 2),
    )


def print_walkthrough(report: dict) -> None:
    """The walkthrough as text, one line per fact."""
    for rank, (partial, shard, full) in enumerate(
        zip(report["partials"], report["shards"], report["gathered"], strict=True)
    ):
        print(f"rank {rank}: partial {partial}  reduce-scatter -> {shard}  all-gather -> {full}")
    print(f"equals the dense reference: {report['reference_equal']}")
    print(f"concatenating the partials instead gives shape {tuple(report['concatenated_shape'])}")
    print(f"bytes per rank (schedule): {report['bytes_per_rank']}; total {report['bytes_total']}")
    print(f"bytes per rank (HLO, ring model): {report['hlo_bytes_per_rank']}")
    for form, counts in report["explicit_mode"]["compiled_collectives"].items():
        print(f"compiled {form}: {counts}")


def main(argv: Sequence[str] | None = None) -> None:
    """Print the walkthrough for ``--ranks`` ranks, the fusion threshold table or the cost model."""
    parser = Parser(__doc__)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--ranks", type=positive_int, default=2, help="ranks (devices) to use")
    what.add_argument(
        "--threshold",
        action="store_true",
        help="the TPU fusion threshold table (the source's rule)",
    )
    what.add_argument(
        "--cost-model", action="store_true", help="modelled TPU v5p time of the gradient's finish"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    with reported(args.debug):
        if args.threshold:
            report = threshold_report()
        elif args.cost_model:
            report = cost_model_report()
        else:
            report = walkthrough_report(args.ranks)
    if args.json:
        print(json.dumps(report, indent=2))
    elif args.threshold:
        print(f"{report['rule']}: {report['source']}")
        for line in threshold_grid(report["rows"]):
            print("  ".join(f"{value}".replace("*", "") for value in line.values()))
    elif args.cost_model:
        print(f"{report['model']}; {report['latency_source']}")
        for case, priced in report["bandwidth_cases"].items():
            print(f"{case}: {priced['source']}")
            for row in cost_table_rows(priced["rows"]):
                print("  ".join(f"{row[key]}" for key in COST_COLUMNS))
        print(f"measured: {report['design_doc_measured']['source']}")
        for row in report["design_doc_measured"]["rows"]:
            print(
                f"{row['collective']}: {row['measured_us_min']:.0f}-{row['measured_us_max']:.0f} us "
                f"measured, model {row['model_us_one-way']:.0f} us one way, "
                f"{row['model_us_bidirectional']:.0f} us both ways"
            )
    else:
        print_walkthrough(report)


if __name__ == "__main__":
    run_module(main)
