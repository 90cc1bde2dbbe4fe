"""Timing on a shared machine: runs interleaved round by round, so that a slow moment falls on
every run of its round alike and cancels in the round's ratios; and a verdict on the range."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Hashable, Mapping, Sequence

import jax


def interleaved[K: Hashable](
    runs: Mapping[K, Callable[[], object]], repeats: int, warmup: int = 1
) -> dict[K, list[float]]:
    """Seconds per call of each run, ``repeats`` rounds of one call each, after ``warmup`` calls."""
    for run in runs.values():
        for _ in range(warmup):
            jax.block_until_ready(run())
    seconds: dict[K, list[float]] = {key: [] for key in runs}
    for _ in range(repeats):
        for key, run in runs.items():
            start = time.perf_counter()
            jax.block_until_ready(run())
            seconds[key].append(time.perf_counter() - start)
    return seconds


def spread(values: Sequence[float]) -> dict[str, float]:
    """Median, minimum and maximum of ``values``."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def milliseconds(seconds: Sequence[float]) -> dict[str, float]:
    """The :func:`spread` of ``seconds``, in milliseconds."""
    return {f"{name}_ms": 1e3 * value for name, value in spread(seconds).items()}


def ratio_range(seconds: Sequence[float], reference: Sequence[float]) -> tuple[float, float, float]:
    """Median, min and max of each round's time over the reference run's time in that round."""
    ratios = [s / r for s, r in zip(seconds, reference, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def verdict(low: float, high: float, reference: float) -> str:
    """Where a measured min-max range lies against ``reference``: a side only if all of it is there.

    >>> verdict(2.2, 3.0, 2.0), verdict(0.5, 0.9, 1.0), verdict(1.5, 2.5, 2.0)
    ('above 2', 'below 1', 'no measurable difference from 2')
    """
    if low > reference:
        return f"above {reference:g}"
    if high < reference:
        return f"below {reference:g}"
    return f"no measurable difference from {reference:g}"
