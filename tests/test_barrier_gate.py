"""The barrier gate's workflow (.github/workflows/barrier-gate.yml): its commands and those of
find-barriers' action it uses, run here in a copy of the checkout, pass with the committed
baseline and fail on one more blocked layer."""

import sys
from pathlib import Path

import pytest

from snippets.support.workflow import copy_checkout, job_steps, run_step

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "barrier-gate.yml"
HERE = {"UV_NO_SYNC": "1", "UV_PROJECT_ENVIRONMENT": sys.prefix}
"""``uv run`` in this environment as it is (it holds the ``guides`` extra), as the job's
``uv run`` would after installing that group."""


@pytest.fixture(scope="module")
def steps() -> list:
    found = job_steps(WORKFLOW, "find-barriers")
    names = ["One training step, with XLA's dump", "Install find-barriers", "Check the dump"]
    assert [step.name for step in found] == names
    return found


def run_job(steps, checkout: Path, *step_options: str) -> list:
    """Run each step in ``checkout``, with ``step_options`` after the training step's command;
    the action installs find-barriers under ``RUNNER_TEMP``, as a runner's temporary folder."""
    train, install, check = steps
    train = train._replace(command=" ".join([train.command, *step_options]))
    runner = {"RUNNER_TEMP": str(checkout / "_runner")}
    return [run_step(step, checkout, **HERE, **runner) for step in (train, install, check)]


def test_the_job_passes_with_the_committed_baseline(steps, tmp_path):
    train, install, check = run_job(steps, copy_checkout(ROOT, tmp_path))
    assert train.returncode == 0, train.stderr[-2000:]
    assert train.stdout.startswith("loss after one step: ")
    assert install.returncode == 0, install.stderr[-2000:]
    assert (check.returncode, check.stdout) == (0, ""), check.stderr[-2000:]


def test_one_more_blocked_layer_fails_the_job_at_that_layer_only(steps, tmp_path):
    train, _, check = run_job(steps, copy_checkout(ROOT, tmp_path), "--layers", "3")
    assert train.returncode == 0, train.stderr[-2000:]
    assert check.returncode == 1, check.stderr[-2000:]
    (line,) = check.stdout.splitlines()
    assert line.startswith("::error file=snippets/one_training_step.py,line=")
    assert "title=find-barriers FB001 (blocked-weight-gradient)" in line
    assert "Blocked fold: weight gradient of model.layers[2].kernel.value, dot f32[64,64]" in line
