"""find_barriers.testing's gate on a lowered step, and the pytest plugin's fixture configured by a
project's ini file: the command line's statuses, in a test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from find_barriers.testing import assert_no_blocked_folds, write_baseline
from tests_jax.jax_steps import lowered

pytest_plugins = ["pytester"]


def test_a_new_blocked_site_fails_listing_each_as_the_command_prints_it():
    with pytest.raises(AssertionError) as failure:
        assert_no_blocked_folds(lowered("explicit"))
    lines = str(failure.value).splitlines()
    assert lines[0] == "jit_mlp_loss: 2 new blocked sites"
    assert [line.split()[:2] for line in lines if "weight gradient of" in line] == [
        ["FB001", "blocked"]
    ] * 2
    assert lines[-1].startswith("FB001 fix: ")


def test_a_step_with_nothing_blocked_passes():
    assert_no_blocked_folds(lowered("auto"))


def test_a_baseline_written_for_the_step_accepts_its_sites_and_only_as_many(tmp_path):
    accepted = tmp_path / "barriers.json"
    write_baseline(lowered("explicit"), accepted)
    assert len(json.loads(accepted.read_text())["sites"]) == 2
    assert_no_blocked_folds(lowered("explicit"), accepted)
    document = json.loads(accepted.read_text())
    accepted.write_text(json.dumps(document | {"sites": document["sites"][:1]}))
    with pytest.raises(AssertionError, match=r"^jit_mlp_loss: 1 new blocked site\n"):
        assert_no_blocked_folds(lowered("explicit"), accepted)


def test_ignoring_the_rule_or_a_threshold_above_the_cost_passes():
    assert_no_blocked_folds(lowered("explicit"), ignore=["fb001"])
    assert_no_blocked_folds(lowered("explicit"), min_bytes=10**12)
    with pytest.raises(AssertionError):
        assert_no_blocked_folds(lowered("explicit"), min_bytes=1)


def test_a_step_whose_only_blocked_site_costs_nothing_passes_unless_min_bytes_is_0():
    """The explicit mesh's scanned stack: its kernel's gradient is stacked in the scan, so the
    estimate prices it at nothing (FB005); the default, ``min_bytes=1``, passes it, ``0`` fails
    on it."""
    assert_no_blocked_folds(lowered("explicit_scanned"))
    with pytest.raises(AssertionError) as failure:
        assert_no_blocked_folds(lowered("explicit_scanned"), min_bytes=0)
    lines = str(failure.value).splitlines()
    assert lines[0] == "jit_stacked_loss: 1 new blocked site"
    assert [line.split()[:2] for line in lines if "weight gradient of" in line] == [
        ["FB005", "blocked"]
    ]
    assert lines[-1].startswith("FB005 fix: ")
    assert_no_blocked_folds(lowered("explicit_scanned"), min_bytes=0, ignore=["FB005"])


def test_bad_input_names_the_problem(tmp_path):
    with pytest.raises(ValueError, match="FB999: no such rule"):
        assert_no_blocked_folds(lowered("auto"), ignore=["FB999"])
    with pytest.raises(ValueError, match="no such baseline file"):
        assert_no_blocked_folds(lowered("auto"), tmp_path / "missing.json")


TEST_FILE = """
from tests_jax.jax_steps import lowered

def test_step(assert_no_blocked_folds):
    assert_no_blocked_folds(lowered("STEP"))
"""
"""A project's test of step ``STEP`` (:data:`~tests_jax.jax_steps.STEPS`) by the fixture."""


def run_plugin(pytester: pytest.Pytester, ini: str, step: str = "explicit") -> pytest.RunResult:
    """The fixture's test of ``step`` in a fresh project whose ini file is ``ini``, in a
    subprocess that loads plugins from their entry points, as a user's run does."""
    pytester.makeini(f"[pytest]\n{ini}")
    pytester.makeconftest("import tests_jax.conftest  # JAX's CPU devices, as in this suite\n")
    pytester.makepyfile(test_step=TEST_FILE.replace("STEP", step))
    return pytester.runpytest_subprocess("-p", "no:cacheprovider")


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A project that can import this suite's steps."""
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parent.parent))
    return pytester


def test_the_plugin_gives_the_fixture_with_the_projects_baseline(project: pytest.Pytester):
    failed = run_plugin(project, "")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*jit_mlp_loss: 2 new blocked sites*"])
    write_baseline(lowered("explicit"), project.path / "barriers.json")
    run_plugin(project, "find_barriers_baseline = barriers.json").assert_outcomes(passed=1)
    run_plugin(project, "find_barriers_min_bytes = 1000000000000").assert_outcomes(passed=1)


def test_the_plugins_default_passes_a_step_whose_only_blocked_site_costs_nothing(
    project: pytest.Pytester,
):
    """No ``find_barriers_min_bytes``: 1, so the scanned stack's FB005 site passes; ``0`` fails
    on it."""
    run_plugin(project, "", "explicit_scanned").assert_outcomes(passed=1)
    failed = run_plugin(project, "find_barriers_min_bytes = 0", "explicit_scanned")
    failed.assert_outcomes(failed=1)
    failed.stdout.fnmatch_lines(["*jit_stacked_loss: 1 new blocked site*", "*FB005 blocked*"])


def test_the_plugin_refuses_a_threshold_that_is_not_bytes(project: pytest.Pytester):
    result = run_plugin(project, "find_barriers_min_bytes = lots")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*find_barriers_min_bytes = 'lots' is not a whole number*"])
