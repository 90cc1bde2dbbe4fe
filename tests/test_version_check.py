"""The version matrix: its committed record and the checks that read it."""

import ast
import copy
import importlib
import importlib.metadata
import inspect
import json
from pathlib import Path

import pytest

from snippets.measure import version_check
from snippets.measure.version_check import flat_facts, story_breaks

MATRIX = json.loads((Path(__file__).parent.parent / "docs" / "version_matrix.json").read_text())


def test_the_record_covers_three_releases_including_the_pinned_one():
    jax_versions = [record["versions"]["jax"] for record in MATRIX["releases"]]
    assert len(set(jax_versions)) >= 3
    assert importlib.metadata.version("jax") in jax_versions


def test_every_recorded_release_ran_and_says_when():
    for record in MATRIX["releases"]:
        assert "error" not in record, record
        assert record["date"]
        assert set(record["versions"]) >= {"python", "jax", "jaxlib", "flax"}


@pytest.fixture
def record():
    return copy.deepcopy(MATRIX["releases"][-1])


def test_the_pinned_release_tells_the_story(record):
    assert story_breaks(record) == []


def test_a_second_barrier_site_breaks_the_story(record):
    explicit_ev = next(r for r in record["results"]["barrier"]["runs"] if r["variant"] == "EV")
    explicit_ev["barrier_sites"] = 0
    assert story_breaks(record) == ["barrier: explicit/EV barrier_sites is 0, the story says 1"]


def test_a_check_that_failed_is_a_break_and_a_row(record):
    record["results"]["lm_head"] = {"error": "AttributeError: no nnx"}
    assert story_breaks(record) == ["lm_head failed: AttributeError: no nnx"]
    assert flat_facts(record)["lm_head: error"] == "AttributeError: no nnx"


def test_a_release_that_did_not_run_gets_a_row_saying_why():
    failed = {"versions": {"python": "3.11", "jax": "0.9.0"}, "error": "SyntaxError: x"}
    assert flat_facts(failed) == {"run": "failed: SyntaxError: x"}
    assert story_breaks(failed) == ["did not run: SyntaxError: x"]


def test_a_fold_in_explicit_mode_breaks_the_story(record):
    runs = [
        {"mode": mode, "variant": variant, "gradient_in_kernel_order": True}
        for mode in ("explicit", "auto")
        for variant in ("EV", "VE")
    ]
    record["results"]["causal_control"] = {"runs": runs}
    assert story_breaks(record) == [
        "causal_control: explicit/EV gradient_in_kernel_order is True, the story says False"
    ]


def test_a_release_without_unreduced_still_tells_the_story(record):
    record["results"]["reduce_scatter_explicit_mode"] = {"error": "TypeError: unreduced"}
    assert story_breaks(record) == []
    assert flat_facts(record)["reduce_scatter_explicit_mode: error"] == "TypeError: unreduced"


def test_every_name_a_check_imports_exists():
    """A check imports its snippets when it runs; a renamed function would only show up as an
    error row in the next ``nox -s matrix`` record, so the names are checked here."""
    for node in ast.walk(ast.parse(inspect.getsource(version_check))):
        if isinstance(node, ast.ImportFrom) and node.module.startswith("snippets."):
            module = importlib.import_module(node.module)
            assert [a.name for a in node.names if not hasattr(module, a.name)] == [], node.module


def test_a_rotated_head_that_moves_more_bytes_breaks_the_story(record):
    record["results"]["vocab_parallel"] = {
        "explicit EV bytes": 100,
        "explicit vocab-parallel bytes": 10,
        "auto EV bytes": 100,
        "auto vocab-parallel bytes": 100,
    }
    assert story_breaks(record) == [
        "vocab_parallel: in auto mode the rotated head moves no fewer bytes"
    ]
