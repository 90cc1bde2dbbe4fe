"""The benchmarks' arithmetic on made-up timings: ratios to the reference run, verdicts, spreads.

No time is measured here, so nothing depends on this machine's speed.
"""

import pytest

from snippets.lowering import StepConfig
from snippets.measure import bench
from snippets.support.timing import spread

SECONDS = {
    ("auto", "EV"): [1.0, 2.0, 1.0],
    ("explicit", "EV"): [1.2, 2.4, 1.1],  # 1.2, 1.2, 1.1 times the reference
    ("explicit", "VE"): [0.5, 1.0, 0.6],  # 0.5, 0.5, 0.6 times
    ("auto", "VE"): [2.0, 4.0, 2.0],  # twice
}


@pytest.fixture
def rows(monkeypatch):
    """bench()'s rows on a dp mesh, every run but three as fast as auto/EV in every round."""
    monkeypatch.setattr(bench, "build_step", lambda config: None)
    monkeypatch.setattr(
        bench,
        "interleaved",
        lambda steps, repeats, warmup: {k: SECONDS.get(k, SECONDS[("auto", "EV")]) for k in steps},
    )
    return {(row["mode"], row["variant"]): row for row in bench.bench(StepConfig(), repeats=3)}


def test_every_run_is_timed_against_auto_ev_round_by_round(rows):
    slower, faster = rows["explicit", "EV"], rows["explicit", "VE"]
    assert (slower["ratio_to_auto_EV"], slower["ratio_min"], slower["ratio_max"]) == (1.2, 1.1, 1.2)
    assert (faster["ratio_to_auto_EV"], faster["ratio_min"], faster["ratio_max"]) == (0.5, 0.5, 0.6)
    assert (slower["median_ms"], slower["min_ms"], slower["max_ms"]) == (1200, 1100, 2400)
    assert slower["repeats"] == 3
    assert rows["auto", "VE"]["ratio_to_auto_EV"] == 2.0


def test_verdicts_above_below_and_no_difference(rows):
    assert rows["explicit", "EV"]["verdict"] == "above 1"
    assert rows["explicit", "VE"]["verdict"] == "below 1"
    assert rows["auto", "VE"]["verdict"] == "above 1"
    assert rows["auto", "custom-vjp"]["verdict"] == "no measurable difference from 1"
    assert rows["auto", "EV"]["verdict"] == "reference"
    assert [row["verdict"] for row in rows.values()].count("reference") == 1


def test_spread_is_median_min_and_max():
    assert spread([1.0, 2.0, 9.0]) == {"median": 2.0, "min": 1.0, "max": 9.0}
