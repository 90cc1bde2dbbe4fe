"""Reduce-scatter step by step: the lesson's 2x2 exchange on N ranks, its bytes counted twice
(:func:`snippets.hlo.reduce_scatter.walkthrough`); or the TPU's fusion rule, or its cost model."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from snippets import collective_cost
from snippets.devices import SIMULATED_DEVICE_BYTES, setup_devices
from snippets.hlo.reduce_scatter import walkthrough
from snippets.support.cli import Parser, available_memory, check_memory, positive_int, reported
from snippets.support.tables import print_report


def walkthrough_bytes(ranks: int) -> int:
    """Memory the walkthrough may need: a device per rank, 2 r (r - 1) transfers of ~1.5 KB."""
    return ranks * SIMULATED_DEVICE_BYTES + 4096 * ranks**2


def most_ranks(available: int) -> int:
    """The largest ``ranks`` whose :func:`walkthrough_bytes` fit in ``available``: its root.

    >>> most_ranks(walkthrough_bytes(100)), most_ranks(walkthrough_bytes(100) - 1)
    (100, 99)
    """
    per_device = SIMULATED_DEVICE_BYTES
    return (math.isqrt(per_device**2 + 4 * 4096 * available) - per_device) // (2 * 4096)


def walkthrough_report(ranks: int) -> dict:
    """The walkthrough for ``ranks``: the lesson's matrices on 2 ranks, integer ranges otherwise."""
    fix = f"use at most --ranks {most_ranks(available_memory())}"
    check_memory(walkthrough_bytes(ranks), f"--ranks {ranks}", fix)
    setup_devices(ranks)
    if ranks == 2:
        return walkthrough()
    a = np.arange(2 * ranks * ranks, dtype=np.float32).reshape(2 * ranks, ranks)
    return walkthrough(ranks, a, np.arange(ranks * 2, dtype=np.float32).reshape(ranks, 2))


def main(argv: Sequence[str] | None = None) -> None:
    """Print the walkthrough for ``--ranks`` ranks, the fusion threshold table or the cost model."""
    parser = Parser(__doc__)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--ranks", type=positive_int, default=2, help="ranks (devices) to use")
    what.add_argument("--threshold", action="store_true", help="the TPU fusion rule's table")
    what.add_argument("--cost-model", action="store_true", help="TPU v5p cost model of the finish")
    args = parser.parse_args(argv)
    with reported(args.debug):
        if args.threshold:
            report = collective_cost.threshold_report()
        elif args.cost_model:
            report = collective_cost.cost_model_report()
        else:
            report = walkthrough_report(args.ranks)
    print_report(report, args.json)
