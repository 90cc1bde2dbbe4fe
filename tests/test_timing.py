"""The one timing loop and the one verdict: their structure and outcomes, never a time."""

from functools import partial

import pytest

from snippets.support import timing
from snippets.support.timing import interleaved, milliseconds, ratio_range, verdict


def test_runs_take_turns_after_their_warmup(monkeypatch):
    """Each sample is the clock's advance across its own call, credited to its own run."""
    clock = iter(range(0, 1000, 10))  # the clock moves 10 between any two readings ...
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []

    def run(name):
        calls.append(name)
        if name == "b" and len(calls) > 4:  # ... and "b" reads it once more when timed
            timing.time.perf_counter()

    seconds = interleaved({name: partial(run, name) for name in ("a", "b")}, repeats=3, warmup=2)
    assert calls == ["a", "a", "b", "b"] + ["a", "b"] * 3
    assert seconds == {"a": [10, 10, 10], "b": [20, 20, 20]}


def test_milliseconds_and_ratios_within_a_round():
    assert milliseconds([0.003, 0.001, 0.002]) == pytest.approx(
        {"median_ms": 2.0, "min_ms": 1.0, "max_ms": 3.0}
    )
    assert ratio_range([2.0, 3.0, 8.0], [1.0, 2.0, 4.0]) == (2.0, 1.5, 2.0)


@pytest.mark.parametrize(
    ("low", "high", "reference", "words"),
    [
        (2.2, 3.0, 2.0, "above 2"),
        (0.5, 0.9, 1.0, "below 1"),
        (1.5, 2.5, 2.0, "no measurable difference from 2"),
        (2.0, 2.4, 2.0, "no measurable difference from 2"),
        (0.8, 1.0, 1.0, "no measurable difference from 1"),
    ],
)
def test_the_verdict_has_three_outcomes(low, high, reference, words):
    assert verdict(low, high, reference) == words
