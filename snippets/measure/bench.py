"""Step time of every (shard mode x head variant), compiled on one mesh and timed interleaved.

CPU timings say nothing about TPU speed; ``--full`` is a larger setting of ours, not the source's.
"""

from __future__ import annotations

from collections.abc import Sequence

from snippets.devices import MESH_DEVICES, setup_devices
from snippets.lowering import MESH_AXES, StepConfig, build_step, every_mode_and_variant
from snippets.support.cli import Parser, check_memory, positive_int, reported
from snippets.support.tables import print_report
from snippets.support.timing import interleaved, milliseconds, ratio_range, verdict

QUICK = {"emb": 128, "vocab": 2048, "batch": 8, "seq": 32}, 7
"""Sizes and interleaved repeats of the quick setting, the docs build's."""
FULL = {"emb": 512, "vocab": 32000, "batch": 8, "seq": 64}, 15
"""Sizes and interleaved repeats of ``--full``."""


def bench(base: StepConfig, repeats: int, warmup: int = 2) -> list[dict]:
    """Time every (mode x variant) on ``base``'s mesh, interleaved, against auto/EV (the reference)."""
    steps = {(c.mode, c.variant): build_step(c) for c in every_mode_and_variant(base)}
    seconds = interleaved(steps, repeats, warmup)
    rows = []
    for (mode, variant), samples in seconds.items():
        median, low, high = ratio_range(samples, seconds[("auto", "EV")])
        judged = "reference" if (mode, variant) == ("auto", "EV") else verdict(low, high, 1.0)
        ratios = {"ratio_to_auto_EV": median, "ratio_min": low, "ratio_max": high}
        row = {"mode": mode, "variant": variant, **milliseconds(samples), **ratios}
        rows.append(row | {"repeats": len(samples), "verdict": judged})
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Print the timing table."""
    parser = Parser(__doc__)
    parser.add_argument("--full", action="store_true", help="larger sizes: emb 512, vocab 32000")
    parser.add_argument("--devices", type=positive_int, default=MESH_DEVICES)
    parser.add_argument("--mesh", choices=tuple(MESH_AXES), default="dp")
    args = parser.parse_args(argv)
    sizes, repeats = FULL if args.full else QUICK
    with reported(args.debug):
        base = StepConfig.model_validate({"devices": args.devices, "mesh": args.mesh, **sizes})
        runs = len(every_mode_and_variant(base))
        check_memory(runs * base.step_bytes, f"{runs} steps of {sizes}")
        setup_devices(args.devices)
        rows = bench(base, repeats)
    report = {"sizes": sizes, "devices": args.devices, "mesh": args.mesh, "rows": rows}
    print_report(report, args.json)
