"""The field (the design doc's 25 configs): each config's MaxText arguments, find-barriers' facts on
a step's CPU module, the rows the MaxText guide renders beside the doc's figures, and the record
``nox -s field`` wrote. Compiling the field itself takes an hour (``nox -s field``), not a test."""

import subprocess
import sys

import pytest

from snippets.hlo.field import (
    field_configs,
    field_rows,
    find_barriers_facts,
    overrides,
    recorded_field,
)
from snippets.lowering import StepConfig, build_step

NAMES = [config["name"] for config in field_configs()["config"]]


def by_name(name: str) -> dict:
    (config,) = [config for config in field_configs()["config"] if config["name"] == name]
    return config


def test_the_doc_ran_25_configs_each_named_once():
    assert len(NAMES) == len(set(NAMES)) == 25


def test_a_config_overrides_the_shrink_and_keeps_the_rest():
    arguments = overrides(by_name("w2048"))
    assert arguments[0] == "model_name=llama2-7b"
    assert "base_emb_dim=2048" in arguments
    assert "base_emb_dim=512" not in arguments
    assert "base_num_decoder_layers=4" in arguments  # the shrink's, not overridden


@pytest.mark.needs_devices(4)
@pytest.mark.parametrize(("mode", "status"), [("explicit", 1), ("auto", 0)])
def test_find_barriers_fails_the_explicit_step_and_passes_auto(mode, status):
    lowered = build_step(StepConfig(mode=mode, emb=128, optimizer="adam")).lower()
    facts = find_barriers_facts(lowered.as_text(dialect="hlo", debug_info=True))
    assert facts["exit_status"] == status
    assert (facts["blocked"] > 0) == (mode == "explicit")
    assert (facts["relayout_copy_bytes"] > 0) == (mode == "explicit")


def test_a_row_sets_the_compiled_added_bytes_beside_the_doc_and_the_estimate():
    record = {
        "configs": [
            {
                "name": "llama2-7b",
                "explicit": {
                    "copy_traffic": 6_000_000,
                    "relayout_traffic": 5_000_000,
                    "reduce_scatters": 4,
                    "optimal_seconds": 3,
                },
                "auto": {
                    "copy_traffic": 1_500_000,
                    "relayout_traffic": 1_000_000,
                    "reduce_scatters": 12,
                    "optimal_seconds": 2,
                },
                "find_barriers": {
                    "relayout_copy_bytes": 3_500_000,
                    "lost_reduce_scatter_bytes": 250_000,
                    "exit_status": 1,
                },
            }
        ]
    }
    (row,) = field_rows(record)
    assert row["compiled_copy_mb"] == 4.0  # explicit's parameter copies over auto's
    assert row["other_copy_mb"] == 0.5
    assert (row["estimate_mb"], row["lost_reduce_scatter_mb"]) == (3.5, 0.25)
    assert row["reduce_scatters"] == (12, 4)
    assert row["doc_reduce_scatters"] == (12, 4)  # item 03's "llama2 12 → 4"
    assert row["doc_copy_mb"] == 196.6
    assert row["optimal_ratio"] == 1.5
    assert row["url"].endswith("#51-onboarded-model-matrix")


def test_the_record_holds_every_config_in_the_docs_order_with_what_made_it():
    record = recorded_field()
    assert [config["name"] for config in record["configs"]] == NAMES
    assert set(record["versions"]) == {"maxtext", "jax", "jaxlib", "libtpu"}
    assert record["shrink"] == field_configs()["source"]["shrink"]


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (["field", "--configs", "llama9"], "no config llama9"),
        (["maxtext_compile"], "the following arguments are required: base"),
    ],
)
def test_bad_arguments_are_one_error_line(command, words):
    run = subprocess.run(
        [sys.executable, "-m", "snippets", *command], capture_output=True, text=True, check=False
    )
    assert run.returncode == 2
    assert run.stderr.startswith("error: ")
    assert words in run.stderr
    assert run.stderr.count("\n") == 1
