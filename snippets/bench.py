"""Step time of every (shard mode x head variant), compiled on one mesh and timed interleaved.

``python -m snippets.bench [--full] [--json] [--devices N]``: the quick setting
runs in seconds (the docs build uses it); ``--full`` is a larger setting of ours
(512 tokens, emb 512, vocab 32000), not the source's. Medians with min and max,
and ratios to auto/EV from the same run: each round's time over auto/EV's time
in that round, with their median, range and verdict. Simulated CPU devices share
the host's cores, and with several of them auto/EV keeps the same relayout as
explicit/EV, so these timings cannot isolate the relayout and say nothing about
TPU speed.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence

import jax

from snippets.cli import Parser, check_memory, positive_int, reported, run_module
from snippets.devices import setup_devices
from snippets.lowering import MESH_LAYOUTS, StepConfig, build_step, every_mode_and_variant

QUICK = {"emb": 128, "vocab": 2048, "batch": 8, "seq": 32, "repeats": 7}
FULL = {"emb": 512, "vocab": 32000, "batch": 8, "seq": 64, "repeats": 15}


def bench(base: StepConfig, repeats: int, warmup: int = 2) -> list[dict]:
    """Time every (mode x variant) on ``base``'s mesh, interleaving the runs round by round."""
    steps = {
        (config.mode, config.variant): build_step(config) for config in every_mode_and_variant(base)
    }
    for step in steps.values():
        for _ in range(warmup):
            jax.block_until_ready(step())
    times: dict[tuple[str, str], list[float]] = {key: [] for key in steps}
    for _ in range(repeats):
        for key, step in steps.items():
            start = time.perf_counter()
            jax.block_until_ready(step())
            times[key].append(time.perf_counter() - start)
    baseline = times[("auto", "EV")]
    rows = []
    for (mode, variant), samples in times.items():
        ratios = [t / b for t, b in zip(samples, baseline, strict=True)]  # same round, paired
        rows.append(
            {
                "mode": mode,
                "variant": variant,
                "median_ms": 1e3 * statistics.median(samples),
                "min_ms": 1e3 * min(samples),
                "max_ms": 1e3 * max(samples),
                "ratio_to_auto_EV": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "repeats": len(samples),
            }
        )
        rows[-1]["verdict"] = verdict(rows[-1])
    return rows


def verdict(row: dict) -> str:
    """What a timing row's ratio range supports: a direction only when it excludes 1.0.

    >>> verdict({"ratio_min": 0.9, "ratio_max": 1.1})
    'no measurable difference'
    >>> verdict({"ratio_min": 0.5, "ratio_max": 0.8})
    'faster than auto EV'
    """
    if row["ratio_max"] < 1:
        return "faster than auto EV"
    if row["ratio_min"] > 1:
        return "slower than auto EV"
    return "no measurable difference"


TIMING_COLUMNS = {
    "mode": "mode",
    "variant": "variant",
    "median": "median (ms)",
    "range": "min - max (ms)",
    "ratio": "ratio to auto EV [min, max]",
    "verdict": "verdict",
}
"""Column titles for :func:`timing_rows`."""


def timing_rows(rows: Sequence[dict]) -> list[dict]:
    """Rows of :func:`bench` formatted for a table: milliseconds and ratios with their ranges."""
    return [
        {
            "mode": r["mode"],
            "variant": r["variant"],
            "median": f"{r['median_ms']:.2f}",
            "range": f"{r['min_ms']:.2f} - {r['max_ms']:.2f}",
            "ratio": f"{r['ratio_to_auto_EV']:.3f} [{r['ratio_min']:.3f}, {r['ratio_max']:.3f}]",
            "verdict": r["verdict"],
        }
        for r in rows
    ]


def settings(full: bool) -> tuple[dict, int]:
    """Sizes and repeat count of the quick or full setting."""
    chosen = dict(FULL if full else QUICK)
    return chosen, chosen.pop("repeats")


def main(argv: Sequence[str] | None = None) -> None:
    """Print the timing table."""
    parser = Parser(__doc__)
    parser.add_argument("--full", action="store_true", help="the published table's sizes")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument("--devices", type=positive_int, default=4)
    parser.add_argument("--mesh", choices=tuple(MESH_LAYOUTS), default="dp")
    args = parser.parse_args(argv)
    sizes, repeats = settings(args.full)
    with reported(args.debug):
        base = StepConfig(devices=args.devices, mesh=args.mesh, **sizes)
        runs = len(every_mode_and_variant(base))
        check_memory(runs * base.step_bytes, f"{runs} steps of {sizes}")
        setup_devices(args.devices)
        rows = bench(base, repeats)
    if args.json:
        print(
            json.dumps(
                {"sizes": sizes, "devices": args.devices, "mesh": args.mesh, "rows": rows}, indent=2
            )
        )
        return
    print(f"{args.devices} devices, mesh {args.mesh}, {sizes}, {repeats} interleaved repeats")
    for r in rows:
        print(
            f"{r['mode']:<9} {r['variant']:<18} median {r['median_ms']:8.2f} ms "
            f"[{r['min_ms']:.2f}, {r['max_ms']:.2f}]  x{r['ratio_to_auto_EV']:.3f} "
            f"[{r['ratio_min']:.3f}, {r['ratio_max']:.3f}]"
        )


if __name__ == "__main__":
    run_module(main)
