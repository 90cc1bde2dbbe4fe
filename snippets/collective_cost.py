"""What a finishing collective costs: a latency-bandwidth model for TPU v5p, and a CPU measurement.

The model is a model, not a measurement: a ring collective over N ranks takes
about ``hops x hop latency + bytes each rank sends / link bandwidth``, with the
bytes from the ring factors of :func:`snippets.hlo.ring_bytes_per_rank`
(reduce-scatter ``(N-1)/N`` of the tensor, all-reduce twice that). It is priced
with two link bandwidths, one way and both directions (:data:`BANDWIDTH_CASES`),
each with its source, and set beside MaxText's measured TPU bandwidths
(:data:`DESIGN_DOC_MEASURED`). The CPU measurement times the same two
collectives on this machine's simulated CPU devices, interleaved.

Run ``python -m snippets.collective_cost [--ranks N ...] [--rows R] [--cols C]
[--repeats K] [--json]`` to measure on CPU.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import time
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
from jax import shard_map
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.cli import Parser, check_memory, positive_int, reported, run_module
from snippets.devices import make_mesh, setup_devices
from snippets.hlo import DTYPE_BYTES, ring_bytes_per_rank


@dataclasses.dataclass(frozen=True)
class Interconnect:
    """The numbers the model needs, each with the public source it is taken from."""

    name: str
    link_bytes_per_s: float
    link_source: str
    hop_latency_s: float
    latency_source: str
    memory_bytes_per_s: float
    memory_source: str


SCALING_BOOK_TPUS = "https://jax-ml.github.io/scaling-book/tpus/"
SCALING_BOOK_SHARDING = "https://jax-ml.github.io/scaling-book/sharding/"

TPU_V5P = Interconnect(
    name="TPU v5p, one way",
    link_bytes_per_s=9e10,
    link_source="The Scaling Book, 'How to Think About TPUs' "
    f"({SCALING_BOOK_TPUS}), interconnect table: TPU v5p ICI bandwidth per link, "
    "one-way, 9e10 bytes/s",
    hop_latency_s=1e-6,
    latency_source="The Scaling Book, 'Sharded Matrices and How to Multiply Them' "
    f"({SCALING_BOOK_SHARDING}), 'A note on ICI latency': about 1 us per hop",
    memory_bytes_per_s=2765e9,
    memory_source="Google Cloud's TPU v5p page (https://cloud.google.com/tpu/docs/v5p-training): "
    "HBM bandwidth per chip 2765 GBps",
)
"""TPU v5p as the one-way ring sees it: each rank sends over one ICI link in one direction."""

TPU_V5P_BOTH_WAYS = dataclasses.replace(
    TPU_V5P,
    name="TPU v5p, both directions",
    link_bytes_per_s=1.8e11,
    link_source="The Scaling Book, 'How to Think About TPUs' "
    f"({SCALING_BOOK_TPUS}), interconnect table: TPU v5p ICI bandwidth per link, "
    "bidi, 1.8e11 bytes/s; its collective costs use it for a full ring "
    f"({SCALING_BOOK_SHARDING})",
)
"""The same ring run both ways at once: each direction carries half of what a rank sends."""

BANDWIDTH_CASES = {"one-way": TPU_V5P, "bidirectional": TPU_V5P_BOTH_WAYS}
"""The two link bandwidths the model is priced with, each with its source."""

DESIGN_DOC = (
    "MaxText's design doc docs/guides/optimization/shard_mode_performance.md, in open PR "
    "https://github.com/AI-Hypercomputer/maxtext/pull/5091"
)
DESIGN_DOC_MEASURED = {
    "reduce-scatter": (91.7e9, 99.3e9),
    "all-reduce": (130.1e9, 138.8e9),
}
"""Bandwidth MaxText's design doc measured on TPU v5p (4 devices) for llama2's bf16 vocab gradient,
in bytes sent per device per second (section 4.2: "91.7-99.3 GB/s versus 130.1-138.8 GB/s for the
all-reduce, so the win is 0.66-0.76x time"). The doc's times are not printed; each is the
per-device wire bytes over its bandwidth, which gives back the doc's 0.66-0.76x."""

FINISHES = ("reduce-scatter", "all-reduce + dynamic-slice")
"""The two ways to finish a weight gradient that each rank keeps a shard of."""


def ring_hops(kind: str, ranks: int) -> int:
    """Steps of a ring collective: N-1 for reduce-scatter and all-gather, 2(N-1) for all-reduce.

    >>> ring_hops("reduce-scatter", 4), ring_hops("all-reduce", 4)
    (3, 6)
    """
    steps = {"reduce-scatter": 1, "all-gather": 1, "all-reduce": 2}
    if kind not in steps:
        raise ValueError(f"Unknown collective {kind!r}; expected one of {sorted(steps)}.")
    return steps[kind] * (ranks - 1)


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


def finish_cost(finish: str, tensor_bytes: int, ranks: int, link: Interconnect = TPU_V5P) -> dict:
    """The model's time for one finish; the slice after an all-reduce reads and writes one shard."""
    if finish not in FINISHES:
        raise ValueError(f"Unknown finish {finish!r}; expected one of {FINISHES}.")
    if ranks < 2 or tensor_bytes % ranks:
        raise ValueError(
            f"{tensor_bytes} bytes over {ranks} ranks: the model needs at least 2 ranks and a "
            "tensor that divides evenly over them."
        )
    cost = predict(finish.split(" + ")[0], tensor_bytes, ranks, link)
    sliced = finish != "reduce-scatter"
    cost["slice_us"] = 1e6 * 2 * tensor_bytes // ranks / link.memory_bytes_per_s if sliced else 0.0
    cost["predicted_us"] = cost["latency_us"] + cost["transfer_us"] + cost["slice_us"]
    return cost


def lm_head_gradient_costs(
    vocab: int = 32000,
    embs: Sequence[int] = (512, 4096),
    shards: int = 4,
    dtypes: Sequence[str] = ("bf16", "f32"),
    link: Interconnect = TPU_V5P,
) -> list[dict]:
    """Modelled time of each finish of the ``[vocab, emb]`` gradient, and its ratio to RS."""
    rows = []
    for emb in embs:
        for dtype in dtypes:
            if dtype not in DTYPE_BYTES:
                raise ValueError(f"Unknown dtype {dtype!r}; use an HLO name such as bf16 or f32.")
            tensor_bytes = vocab * emb * DTYPE_BYTES[dtype]
            costs = {finish: finish_cost(finish, tensor_bytes, shards, link) for finish in FINISHES}
            rows += [
                {
                    "emb": emb,
                    "dtype": dtype,
                    "shards": shards,
                    "gradient_bytes": tensor_bytes,
                    "collective": finish,
                    **cost,
                    "ratio_to_reduce_scatter": cost["predicted_us"]
                    / costs["reduce-scatter"]["predicted_us"],
                }
                for finish, cost in costs.items()
            ]
    return rows


COST_COLUMNS = {
    "emb": "emb",
    "dtype": "dtype",
    "collective": "finish",
    "bytes_per_rank": "bytes sent per rank",
    "predicted_us": "model (us)",
    "ratio_to_reduce_scatter": "x reduce-scatter",
}
"""Column titles for a table of :func:`lm_head_gradient_costs` rows."""


def cost_table_rows(rows: Sequence[dict]) -> list[dict]:
    """Rows of :func:`lm_head_gradient_costs` with readable numbers, for a table."""
    return [
        {
            **row,
            "bytes_per_rank": f"{row['bytes_per_rank']:,}",
            "predicted_us": f"{row['predicted_us']:.0f}",
            "ratio_to_reduce_scatter": f"{row['ratio_to_reduce_scatter']:.2f}",
        }
        for row in rows
    ]


def design_doc_comparison(
    vocab: int = 32000, emb: int = 512, shards: int = 4, dtype: str = "bf16"
) -> list[dict]:
    """Each collective's time as MaxText's design doc measured it, beside the model's two cases.

    The defaults are the doc's llama2 vocab gradient (bf16 ``[512, 32000]``, 4 devices).
    Measured times are the model's bytes sent per device over the doc's bandwidths
    (:data:`DESIGN_DOC_MEASURED`); model times are the collective alone, without the slice.
    """
    tensor_bytes = vocab * emb * DTYPE_BYTES[dtype]
    rows = []
    for kind, (slowest, fastest) in DESIGN_DOC_MEASURED.items():
        sent = predict(kind, tensor_bytes, shards)["bytes_per_rank"]
        row = {
            "collective": kind,
            "bytes_per_rank": sent,
            "measured_us_min": 1e6 * sent / fastest,
            "measured_us_max": 1e6 * sent / slowest,
        }
        for case, link in BANDWIDTH_CASES.items():
            cost = predict(kind, tensor_bytes, shards, link)
            row[f"model_us_{case}"] = cost["latency_us"] + cost["transfer_us"]
        rows.append(row)
    return rows


COMPARISON_COLUMNS = {
    "collective": "collective",
    "sent": "MB sent per device",
    "measured": "doc's GB/s as us",
    "one-way": "model, one way",
    "bidirectional": "model, both ways",
}
"""Column titles for :func:`comparison_table_rows`."""


def comparison_table_rows(rows: Sequence[dict]) -> list[dict]:
    """Rows of :func:`design_doc_comparison` with readable numbers, for a table."""
    return [
        {
            "collective": row["collective"],
            "sent": f"{row['bytes_per_rank'] / 1e6:.2f}",
            "measured": f"{row['measured_us_min']:.0f}-{row['measured_us_max']:.0f}",
            **{case: f"{row[f'model_us_{case}']:.0f}" for case in BANDWIDTH_CASES},
        }
        for row in rows
    ]


def finish_functions(ranks: int) -> dict[str, Callable]:
    """Reduce-scatter and all-reduce of each rank's partial block, jitted on a ``ranks`` mesh."""
    mesh = make_mesh((ranks,), ("k",), "explicit")

    def on_ranks(body: Callable, out_specs: P) -> Callable:
        return jax.jit(shard_map(body, mesh=mesh, in_specs=P("k"), out_specs=out_specs))

    return {
        "reduce-scatter": on_ranks(
            lambda p: jax.lax.psum_scatter(p, "k", scatter_dimension=0, tiled=True), P("k")
        ),
        "all-reduce": on_ranks(lambda p: jax.lax.psum(p, "k"), P()),
    }


def measurement_bytes(rank_counts: Sequence[int], rows: int, cols: int) -> int:
    """Memory the measurement may need: every rank's partial, an all-reduced copy and the shards."""
    return sum(3 * n * rows * cols * 4 for n in rank_counts)


def time_finishes(
    rank_counts: Sequence[int] = (2, 8), rows: int = 4096, cols: int = 512, repeats: int = 21
) -> dict:
    """Time reduce-scatter against all-reduce of a float32 ``[rows, cols]`` partial on each rank.

    Every (rank count, collective) runs once per round, round after round, so
    slow moments of a shared machine fall on all of them alike. Ratios are
    all-reduce over reduce-scatter within a round; the model's ratio is the
    ring's bytes ratio.
    """
    for n in rank_counts:
        if rows % n:
            raise ValueError(
                f"rows {rows} do not divide over {n} ranks; the reduce-scatter gives each rank "
                "rows/ranks rows: use a multiple of every rank count."
            )
    runs, inputs = {}, {}
    for n in rank_counts:
        mesh = make_mesh((n,), ("k",), "explicit")
        inputs[n] = jax.device_put(
            jnp.ones((n * rows, cols), jnp.float32), NamedSharding(mesh, P("k"))
        )
        runs.update({(n, kind): run for kind, run in finish_functions(n).items()})
    for (n, _), run in runs.items():
        jax.block_until_ready(run(inputs[n]))
    seconds: dict[tuple[int, str], list[float]] = {key: [] for key in runs}
    for _ in range(repeats):
        for (n, kind), run in runs.items():
            start = time.perf_counter()
            jax.block_until_ready(run(inputs[n]))
            seconds[(n, kind)].append(time.perf_counter() - start)
    timings = [
        {
            "ranks": n,
            "collective": kind,
            "median_ms": 1e3 * statistics.median(samples),
            "min_ms": 1e3 * min(samples),
            "max_ms": 1e3 * max(samples),
        }
        for (n, kind), samples in seconds.items()
    ]
    ratios = []
    for n in rank_counts:
        paired = [
            ar / rs
            for ar, rs in zip(
                seconds[(n, "all-reduce")], seconds[(n, "reduce-scatter")], strict=True
            )
        ]
        model = (
            predict("all-reduce", rows * cols * 4, n)["bytes_per_rank"]
            / predict("reduce-scatter", rows * cols * 4, n)["bytes_per_rank"]
        )
        ratios.append(
            {
                "ranks": n,
                "ratio_median": statistics.median(paired),
                "ratio_min": min(paired),
                "ratio_max": max(paired),
                "model_bytes_ratio": model,
                "against_model": range_verdict(min(paired), max(paired), model),
                "against_1": range_verdict(min(paired), max(paired), 1.0),
            }
        )
    sizes = {"rows": rows, "cols": cols, "dtype": "f32", "partial_bytes": rows * cols * 4}
    return {**sizes, "repeats": repeats, "timings": timings, "ratios": ratios}


def range_verdict(low: float, high: float, reference: float, name: str | None = None) -> str:
    """Where a measured min-max range lies against ``reference``: above it, below it, or neither.

    A side is named only when the whole range is on it; a range that includes the
    reference shows no measurable difference from it.

    >>> range_verdict(2.2, 3.0, 2.0), range_verdict(1.1, 1.6, 2.0)
    ('above 2', 'below 2')
    >>> range_verdict(1.5, 2.5, 2.0, "the model's 2x")
    "no measurable difference from the model's 2x"
    """
    name = f"{reference:g}" if name is None else name
    if low > reference:
        return f"above {name}"
    if high < reference:
        return f"below {name}"
    return f"no measurable difference from {name}"


def verdict(ratio: dict) -> str:
    """One sentence on a measured ratio row of :func:`time_finishes` against the model's bytes."""
    low, high, model = ratio["ratio_min"], ratio["ratio_max"], ratio["model_bytes_ratio"]
    against = range_verdict(low, high, model, f"the model's {model:g}x")
    return (
        f"at {ratio['ranks']} ranks, all-reduce / reduce-scatter {ratio['ratio_median']:.2f} "
        f"(range {low:.2f} to {high:.2f}): {against}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Time reduce-scatter against all-reduce on CPU and print the ratios beside the model's."""
    parser = Parser(__doc__)
    parser.add_argument(
        "--ranks", type=positive_int, nargs="+", default=[2, 8], help="rank counts to time"
    )
    parser.add_argument("--rows", type=positive_int, default=4096, help="rows of each partial")
    parser.add_argument("--cols", type=positive_int, default=512, help="columns of each partial")
    parser.add_argument("--repeats", type=positive_int, default=21, help="interleaved rounds")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    with reported(args.debug):
        check_memory(
            measurement_bytes(args.ranks, args.rows, args.cols),
            f"--ranks {' '.join(map(str, args.ranks))} --rows {args.rows} --cols {args.cols}",
        )
        setup_devices(max(args.ranks))
        report = time_finishes(args.ranks, args.rows, args.cols, args.repeats)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"f32[{args.rows},{args.cols}] partial per rank, {args.repeats} interleaved rounds (CPU)")
    for t in report["timings"]:
        print(
            f"{t['ranks']} ranks {t['collective']:>14}: median {t['median_ms']:.3f} ms "
            f"[{t['min_ms']:.3f}, {t['max_ms']:.3f}]"
        )
    for ratio in report["ratios"]:
        print(verdict(ratio))


if __name__ == "__main__":
    run_module(main)
