"""What the TPU's and GPU's compilers receive, lowered here without that hardware; the relayout table."""

import json

import pytest

from snippets import barrier
from snippets.hlo import sharding_call_count
from snippets.lowering import StepConfig, lower_step

BASE = StepConfig()
pytestmark = pytest.mark.needs_devices(BASE.devices)


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_tpu_and_gpu_receive_the_cpu_lowering(mode):
    config = BASE.replace(mode=mode)
    calls = sharding_call_count(lower_step(config).hlo)
    lowered = barrier.lowered_for(config)
    assert set(lowered) == {"tpu", "cuda"}
    for platform in lowered.values():
        assert platform == {"identical_to_cpu": True, "sharding_calls": calls, "diff": []}
    assert (calls > 0) == (mode == "explicit")


def test_a_differing_lowering_is_reported_line_by_line():
    assert barrier._line_diff("a\nb\nc", "a\nB\nc") == ["-b", "+B"]


def test_the_cli_json_carries_lowered_for(monkeypatch, capsys):
    # One run instead of eight, and no causal control: this test is about the new key.
    monkeypatch.setattr(barrier, "every_mode_and_variant", lambda base: [base])
    monkeypatch.setattr(barrier, "causal_control", lambda base: [])
    barrier.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    for platform in ("tpu", "cuda"):
        assert isinstance(report["lowered_for"][platform]["identical_to_cpu"], bool)
        assert (
            report["lowered_for"][platform]["sharding_calls"] == report["runs"][0]["sharding_calls"]
        )
    assert report["pass_order"]["partitioner_pass"] in ("shardy-xla", "spmd-partitioning")


def test_the_relayout_summary_groups_runs_whose_counts_agree():
    summary, details = barrier.relayout_summary({"dp": BASE})
    grouped = [run for row in summary for run in row["runs"].split(", ")]
    assert sorted(grouped) == sorted(row["run"] for row in details)
    assert len(details) == 8
    counts = {row["runs"]: row["dp"] for row in summary}
    assert len(set(counts.values())) == len(counts)  # one row per distinct count
    by_run = {row["run"]: row for row in details}
    for mode in ("explicit", "auto"):
        for variant in ("VE", "kernel-order-grad"):
            assert by_run[f"{mode}/{variant}"]["dp"] == 0
            assert by_run[f"{mode}/{variant}"]["dp: ops"] == "none"
        assert by_run[f"{mode}/EV"]["dp"] >= 1
