"""What a finishing collective costs: a latency-bandwidth model for TPU v5p, and a CPU measurement.

The model is a model, not a measurement: a ring collective over N ranks takes
about ``hops x hop latency + bytes each rank sends / link bandwidth``, with the
bytes from the ring factors of :func:`snippets.hlo.ring_bytes_per_rank`
(reduce-scatter ``(N-1)/N`` of the tensor, all-reduce twice that). Each number
it uses comes with its source. The measurement times the same two collectives
on this machine's simulated CPU devices, interleaved, so the two can be set
side by side.

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

from snippets.cli import Parser, check_memory, positive_int, reported
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


TPU_V5P = Interconnect(
    name="TPU v5p",
    link_bytes_per_s=9e10,
    link_source="The Scaling Book, 'How to Think About TPUs' (jax-ml/scaling-book, tpus.md), "
    "interconnect table: TPU v5p ICI bandwidth per link, one-way, 9e10 bytes/s",
    hop_latency_s=1e-6,
    latency_source="The Scaling Book, 'Sharded Matrices and How to Multiply Them' "
    "(jax-ml/scaling-book, sharding.md), 'A note on ICI latency': about 1 us per hop",
    memory_bytes_per_s=2765e9,
    memory_source="Google Cloud TPU v5p documentation (cloud.google.com/tpu/docs/v5p): "
    "HBM bandwidth per chip 2765 GBps",
)
"""TPU v5p as the model sees it: one ICI link used one way, its hop latency, and HBM bandwidth."""

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
                "agrees_with_model": min(paired) <= model <= max(paired),
                "measurable": not min(paired) <= 1.0 <= max(paired),
            }
        )
    sizes = {"rows": rows, "cols": cols, "dtype": "f32", "partial_bytes": rows * cols * 4}
    return {**sizes, "repeats": repeats, "timings": timings, "ratios": ratios}


def verdict(ratio: dict) -> str:
    """One sentence on how a measured ratio row of :func:`time_finishes` compares with the model."""
    n, model = ratio["ranks"], ratio["model_bytes_ratio"]
    spread = (
        f"all-reduce / reduce-scatter {ratio['ratio_median']:.2f}, "
        f"range {ratio['ratio_min']:.2f} to {ratio['ratio_max']:.2f}"
    )
    if not ratio["measurable"]:
        return f"at {n} ranks, no measurable difference ({spread}, which includes 1.0)"
    if ratio["agrees_with_model"]:
        return f"at {n} ranks, consistent with the model's {model:g}x ({spread})"
    side = "below" if ratio["ratio_max"] < model else "above"
    return f"at {n} ranks, {side} the model's {model:g}x ({spread})"


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
    main()
