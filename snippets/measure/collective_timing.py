"""Reduce-scatter against all-reduce, timed on simulated CPUs beside the ring model's ratio."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import jax
import jax.numpy as jnp
from jax import shard_map
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from snippets.collective_cost import predict
from snippets.devices import make_mesh, setup_devices
from snippets.support.cli import Parser, check_memory, positive_int, reported
from snippets.support.tables import print_report
from snippets.support.timing import interleaved, milliseconds, ratio_range, verdict


def finish_functions(mesh: Mesh) -> dict[str, Callable]:
    """Reduce-scatter and all-reduce of each rank's partial block along ``mesh``'s axis ``k``."""
    finishes = {
        "reduce-scatter": (partial(jax.lax.psum_scatter, axis_name="k", tiled=True), P("k")),
        "all-reduce": (partial(jax.lax.psum, axis_name="k"), P()),
    }
    return {
        kind: jax.jit(shard_map(finish, mesh=mesh, in_specs=P("k"), out_specs=out_specs))
        for kind, (finish, out_specs) in finishes.items()
    }


def time_finishes(
    rank_counts: Sequence[int] = (2, 8), rows: int = 4096, cols: int = 512, repeats: int = 21
) -> dict:
    """Time reduce-scatter against all-reduce of a float32 ``[rows, cols]`` partial on each rank;
    ratios are all-reduce over reduce-scatter within a round, the model's the bytes ratio."""
    if bad := [n for n in rank_counts if n < 2 or rows % n]:
        raise ValueError(
            f"rows {rows} over {bad[0]} ranks: a collective needs 2 ranks or more, and gives each "
            "rank rows/ranks rows; use a multiple of every rank count."
        )
    runs = {}
    for n in rank_counts:
        mesh = make_mesh((n,), ("k",), "explicit")
        partials = jnp.ones((n * rows, cols), jnp.float32, device=NamedSharding(mesh, P("k")))
        for kind, finish in finish_functions(mesh).items():
            runs[(n, kind)] = partial(finish, partials)
    seconds = interleaved(runs, repeats)
    ratios = []
    for n in rank_counts:
        median, low, high = ratio_range(seconds[(n, "all-reduce")], seconds[(n, "reduce-scatter")])
        ar, rs = (predict(kind, rows * cols * 4, n) for kind in ("all-reduce", "reduce-scatter"))
        model = ar["bytes_per_rank"] / rs["bytes_per_rank"]
        ranges = {"ratio_median": median, "ratio_min": low, "ratio_max": high}
        judged = {"against_model": verdict(low, high, model), "against_1": verdict(low, high, 1.0)}
        ratios.append({"ranks": n, **ranges, "model_bytes_ratio": model, **judged})
    return {
        "rows": rows,
        "cols": cols,
        "dtype": "f32",
        "partial_bytes": rows * cols * 4,
        "repeats": repeats,
        "timings": [
            {"ranks": n, "collective": kind, **milliseconds(samples)}
            for (n, kind), samples in seconds.items()
        ],
        "ratios": ratios,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Time reduce-scatter against all-reduce on CPU and print the ratios beside the model's."""
    parser = Parser(__doc__)
    parser.add_argument("--ranks", type=positive_int, nargs="+", default=[2, 8], help="rank counts")
    parser.add_argument("--rows", type=positive_int, default=4096, help="rows of each partial")
    parser.add_argument("--cols", type=positive_int, default=512, help="columns of each partial")
    parser.add_argument("--repeats", type=positive_int, default=21, help="interleaved rounds")
    args = parser.parse_args(argv)
    with reported(args.debug):
        nbytes = sum(3 * n * args.rows * args.cols * 4 for n in args.ranks)  # partial, sum, shard
        ranks = " ".join(map(str, args.ranks))
        check_memory(nbytes, f"--ranks {ranks} --rows {args.rows} --cols {args.cols}")
        setup_devices(max(args.ranks))
        report = time_finishes(args.ranks, args.rows, args.cols, args.repeats)
    print_report(report, args.json)
