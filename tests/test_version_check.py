"""The version matrix: its committed record and the checks that read it."""

import ast
import importlib
import inspect
import json
import typing
from pathlib import Path

import pytest

from snippets.measure import version_check
from snippets.measure.version_check import CHECKS, STORY_CHECKS, Results, flat_facts, story_breaks

MATRIX = Path(__file__).resolve().parent.parent / "docs" / "version_matrix.json"


def story_record() -> dict:
    """A release's record as ``run_checks`` writes it, shaped as the story needs it."""
    runs = [
        {"mode": mode, "variant": variant}
        for mode in ("explicit", "auto")
        for variant in ("EV", "VE", "custom-vjp", "auto-axes")
    ]
    explicit_ev = {"mode": "explicit", "variant": "EV"}
    barrier = [run | {"barrier_sites": int(run == explicit_ev)} for run in runs]
    control = [run | {"gradient_in_kernel_order": run != explicit_ev} for run in runs]
    return {
        "versions": {"python": "3.12", "jax": "0.12.0.1", "jaxlib": "0.12.0.1", "flax": "0.12.12"},
        "date": "2026-12-01",
        "results": {
            "barrier": {"runs": barrier, "partitioner_first": True},
            "causal_control": {"runs": control},
            "reduce_scatter": {"shards": [[[19.0, 22.0]], [[43.0, 50.0]]]},
            "reduce_scatter_explicit_mode": {"resharded": [[19.0, 22.0], [43.0, 50.0]]},
            "lm_head": {"same_seed_identical": True},
            "vocab_parallel": {
                f"{mode} {variant} bytes": bytes_
                for mode in ("explicit", "auto")
                for variant, bytes_ in (("EV", 4718598), ("vocab-parallel", 76416))
            },
        },
    }


@pytest.fixture
def record():
    return story_record()


def test_the_story_holds_on_a_record_shaped_as_it_says(record):
    assert story_breaks(record) == []


@pytest.mark.needs_devices(4)
def test_the_command_exits_1_where_the_story_breaks(monkeypatch, capsys):
    broken = story_record()
    broken["results"]["reduce_scatter"]["shards"] = [[[1.0, 2.0]], [[3.0, 4.0]]]
    monkeypatch.setattr(version_check, "run_checks", lambda: broken)
    with pytest.raises(SystemExit) as exit_info:
        version_check.main(["--json"])
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out) == broken  # the record is still printed, for the matrix
    assert "the story does not hold on JAX 0.12.0.1" in captured.err


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


def test_a_simplifier_before_the_partitioner_breaks_the_story(record):
    record["results"]["barrier"]["partitioner_first"] = False
    assert story_breaks(record) == ["on CPU the simplifier now runs before the partitioner"]


def test_other_rows_from_the_2x2_reduce_scatter_break_the_story(record):
    record["results"]["reduce_scatter"]["shards"] = [[[43.0, 50.0]], [[19.0, 22.0]]]
    assert story_breaks(record) == ["the 2x2 reduce-scatter gives [[[43.0, 50.0]], [[19.0, 22.0]]]"]


@pytest.mark.parametrize(
    ("check", "fact"),
    [
        ("vocab_parallel", "explicit EV bytes"),
        ("vocab_parallel", "auto vocab-parallel bytes"),
        ("reduce_scatter", "shards"),
        ("barrier", "partitioner_first"),
    ],
)
def test_a_story_fact_missing_from_a_record_is_an_error_not_a_story_that_holds(record, check, fact):
    """A renamed key (``bytes`` to ``traffic``) must not turn a check off."""
    results = record["results"][check]
    results[f"{fact} renamed"] = results.pop(fact)
    with pytest.raises(KeyError, match=fact):
        story_breaks(record)


def check_record_types(results: dict) -> None:
    """Each check's facts have exactly the keys of the record type its producer returns."""
    for name, facts in results.items():
        kind = typing.get_type_hints(CHECKS[name])["return"]
        if "error" in facts or not typing.is_typeddict(kind):  # capabilities: one key per check
            continue
        assert set(facts) == kind.__required_keys__, name
        run_kind = typing.get_type_hints(kind).get("runs")
        for run in facts.get("runs", []):
            assert set(run) == typing.get_args(run_kind)[0].__required_keys__, name


def test_every_committed_release_has_the_typed_facts_and_tells_the_story():
    """The version-matrix page renders this file with the code here: its keys are the types'."""
    assert Results.__required_keys__ == set(CHECKS)
    for release in json.loads(MATRIX.read_text())["releases"]:
        assert set(release["results"]) == set(CHECKS)
        check_record_types(release["results"])
        assert story_breaks(release) == [], release["versions"]


@pytest.mark.needs_devices(4)
def test_the_cheaper_story_producers_tell_the_story_through_story_breaks(record):
    """Real facts, not hand-written ones: a producer that renames a key fails here."""
    produced = {name: CHECKS[name]() for name in ("reduce_scatter", "lm_head", "vocab_parallel")}
    check_record_types(produced)
    record["results"] |= produced
    assert set(produced) < set(STORY_CHECKS)
    assert story_breaks(record) == []
