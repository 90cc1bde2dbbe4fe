"""The barrier gate's workflow (.github/workflows/barrier-gate.yml): its commands and those of
find-barriers' action it uses, run here in a copy of the checkout, pass with the committed
baseline and fail on one more blocked layer."""

import shutil
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


@pytest.fixture(scope="module")
def runner(steps, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A runner's temporary folder, where the action's first step installed find-barriers once
    (from the checkout: the install does not depend on the copy)."""
    runner = {"RUNNER_TEMP": str(tmp_path_factory.mktemp("runner"))}
    install = run_step(steps[1], ROOT, **HERE, **runner)
    assert install.returncode == 0, install.stderr[-2000:]
    return runner


def run_job(steps, runner: dict[str, str], checkout: Path, *step_options: str) -> list:
    """Run the job's training step, with ``step_options`` after its command, then the action's
    check, in ``checkout``."""
    train, _, check = steps
    train = train._replace(command=" ".join([train.command, *step_options]))
    return [run_step(step, checkout, **HERE, **runner) for step in (train, check)]


def test_the_job_passes_with_the_committed_baseline(steps, runner, tmp_path):
    train, check = run_job(steps, runner, copy_checkout(ROOT, tmp_path))
    assert train.returncode == 0, train.stderr[-2000:]
    assert train.stdout.startswith("loss after one step: ")
    assert (check.returncode, check.stdout) == (0, ""), check.stderr[-2000:]


def test_one_more_blocked_layer_fails_the_job_at_that_layer_only(steps, runner, tmp_path):
    train, check = run_job(steps, runner, copy_checkout(ROOT, tmp_path), "--layers", "3")
    assert train.returncode == 0, train.stderr[-2000:]
    assert check.returncode == 1, check.stderr[-2000:]
    (line,) = check.stdout.splitlines()
    assert line.startswith("::error file=snippets/one_training_step.py,line=")
    assert "title=find-barriers FB001 (blocked-weight-gradient)" in line
    assert "Blocked fold: weight gradient of model.layers[2].kernel.value, dot f32[64,64]" in line


def test_the_actions_paths_are_one_a_line_and_may_hold_spaces(steps, runner, tmp_path):
    data = ROOT / "find-barriers" / "tests" / "data"
    folders = [tmp_path / "dump one", tmp_path / "dump two"]
    for folder, name in zip(folders, ("scanned_fixed.hlo.txt", "scanned.hlo.txt"), strict=True):
        folder.mkdir()
        shutil.copy(data / name, folder / "module_0001.jit_train_step.before_optimizations.txt")
    check = steps[2]._replace(env=steps[2].env | {"PATHS": f"{folders[0]}\n  {folders[1]}  \n\n"})
    # the scan's weight gradients cost nothing by the estimate: --min-bytes 0 fails them too
    found = run_step(
        check, tmp_path, **HERE, **runner, BASELINE="", FORMAT="text", ARGS="--min-bytes 0"
    )
    assert found.returncode == 1, found.stderr
    assert found.stdout.splitlines()[-1].startswith("2 modules: 6 transpose-of-dot sites")
