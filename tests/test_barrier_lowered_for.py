"""What the TPU's and GPU's compilers receive, lowered here without that hardware; the CLI; the
relayout table."""

import json

import jax
import jax.numpy as jnp
import pytest

from snippets.devices import make_mesh
from snippets.hlo import barrier
from snippets.lowering import Step, StepConfig
from snippets.measure import barrier as barrier_command

BASE = StepConfig()
pytestmark = pytest.mark.needs_devices(BASE.devices)


@pytest.mark.parametrize("mode", ["explicit", "auto"])
def test_tpu_and_gpu_receive_the_cpu_lowering(mode):
    lowered = barrier.lowered_for(StepConfig(mode=mode))
    assert set(lowered) == {"tpu", "cuda"}
    for platform in lowered.values():
        assert (platform["identical_to_cpu"], platform["diff"]) == (True, [])
        assert (platform["sharding_calls"] > 0) == (mode == "explicit")


def test_an_operation_lowered_per_platform_is_not_identical(monkeypatch):
    """The negative case: JAX 0.12 lowers ``cumsum`` per platform, a reduce-window on CPU and
    TPU, its own op on CUDA."""
    mesh = make_mesh((1,), ("data",), "explicit")
    step = Step(mesh, jax.jit(jnp.cumsum), (jnp.arange(8.0),), BASE)
    monkeypatch.setattr(barrier, "build_step", lambda config: step)
    lowered = barrier.lowered_for(BASE)
    assert (lowered["tpu"]["identical_to_cpu"], lowered["tpu"]["diff"]) == (True, [])
    assert not lowered["cuda"]["identical_to_cpu"]
    assert lowered["cuda"]["diff"]


def test_a_differing_lowering_is_reported_line_by_line():
    assert barrier._line_diff("a\nb\nc", "a\nB\nc") == ["-b", "+B"]


@pytest.fixture(scope="module")
def one_run_report():
    """``python -m snippets barrier --json``'s report, with one run instead of eight and no
    causal control (``tests/test_causal_control.py`` checks that)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(barrier, "every_mode_and_variant", lambda base: [base])
        return barrier.barrier_report(BASE)


def test_the_cli_json_carries_every_key(one_run_report, monkeypatch, capsys):
    monkeypatch.setattr(barrier_command, "barrier_report", lambda base: dict(one_run_report))
    monkeypatch.setattr(barrier_command, "causal_control", lambda base: [])
    barrier_command.main(["--json"])
    report = json.loads(capsys.readouterr().out)
    assert set(report) == {
        *("backend", "device_kind", "devices", "mesh", "sizes", "pass_order", "runs", "logits_pin"),
        *("single_device", "lowered_for", "causal_control"),
    }
    for platform in ("tpu", "cuda"):
        assert isinstance(report["lowered_for"][platform]["identical_to_cpu"], bool)
        assert (
            report["lowered_for"][platform]["sharding_calls"] == report["runs"][0]["sharding_calls"]
        )
    assert report["pass_order"]["partitioner_pass"] in ("shardy-xla", "spmd-partitioning")


def test_the_cli_text_has_a_row_per_run(one_run_report, monkeypatch, capsys):
    monkeypatch.setattr(barrier_command, "barrier_report", lambda base: dict(one_run_report))
    monkeypatch.setattr(barrier_command, "causal_control", lambda base: [])
    barrier_command.main([])
    out = capsys.readouterr().out
    assert "| explicit | EV |" in out
    assert f"  folded: {one_run_report['single_device']['folded']}" in out


def test_the_relayout_summary_groups_runs_whose_counts_agree(monkeypatch):
    variants = [
        ("explicit", "EV"),
        ("explicit", "VE"),
        ("auto", "EV"),
        ("auto", "custom-vjp"),
    ]
    configs = [StepConfig(mode=mode, variant=variant) for mode, variant in variants]
    monkeypatch.setattr(barrier, "every_mode_and_variant", lambda base: configs)
    summary, details = barrier.relayout_summary({"dp": BASE})
    grouped = [run for row in summary for run in row["runs"].split(", ")]
    assert sorted(grouped) == sorted(row["run"] for row in details)
    counts = {row["runs"]: row["dp"] for row in summary}
    assert len(set(counts.values())) == len(counts) == 2  # one row per distinct count
    by_run = {row["run"]: row for row in details}
    for fixed in ("explicit/VE", "auto/custom-vjp"):
        assert (by_run[fixed]["dp"], by_run[fixed]["dp: ops"]) == (0, "none")
    for mode in ("explicit", "auto"):
        assert by_run[f"{mode}/EV"]["dp"] >= 1
