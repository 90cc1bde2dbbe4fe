"""Behaviour the other tests left open, found by mutation testing (``nox -s mutation``): verdicts at
the edges of the fold rule, baseline entries counted one a site, exit statuses of mixed runs, what
the GitHub and SARIF formats give a stale entry, and the small helpers of the command line."""

from __future__ import annotations

import argparse
import json

import hlo_texts
import pytest

import find_barriers
import find_barriers.__main__
from conftest import DATA
from find_barriers import Verdict, find_sites, read_hlo
from find_barriers._baseline import FORMAT
from find_barriers._cli import path_pair
from find_barriers._dumps import _before, module_name
from find_barriers._formats.github import _escape
from find_barriers._program import parse_instruction
from find_barriers._shapes import shard_bytes, shard_dims

DOT_MODULE = """HloModule m

ENTRY main {
  a = f32[LHS]{LHS_LAYOUT} parameter(0)
  b = f32[RHS]{RHS_LAYOUT} parameter(1)
  d = f32[OUT]{1,0} dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s = f32[OUT]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}
  ROOT t = f32[TOUT]{0,1} transpose(s), dimensions={1,0}
}
"""


def dot_site(lhs: str, rhs: str, out: str):
    """The one site of a dot of ``lhs`` by ``rhs`` (each contracted on its first dimension)."""
    layout = lambda dims: ",".join(str(i) for i in reversed(range(dims.count(",") + 1)))
    text = (
        DOT_MODULE.replace("LHS_LAYOUT", layout(lhs))
        .replace("RHS_LAYOUT", layout(rhs))
        .replace("TOUT", ",".join(reversed(out.split(","))))
        .replace("LHS", lhs)
        .replace("RHS", rhs)
        .replace("OUT", out)
    )
    (site,) = find_sites(read_hlo(text))
    return site


def test_a_dot_with_one_free_dimension_a_side_is_blocked_by_the_sharding_call():
    site = dot_site("8,16", "8,32", "16,32")
    assert site.verdict is Verdict.BLOCKED
    assert site.blocked


def test_a_dot_operand_with_no_non_contracting_dimension_is_kept():
    site = dot_site("8", "8,4,2", "4,2")
    assert site.verdict is Verdict.KEPT
    assert not site.blocked


def test_a_dot_operand_with_two_non_contracting_dimensions_is_kept():
    site = dot_site("8,4,2", "8", "4,2")
    assert site.verdict is Verdict.KEPT


def write_baseline(run, tmp_path, dump: str, name: str = "baseline.json") -> str:
    baseline = tmp_path / name
    status, _, _ = run(DATA / dump, "--write-baseline", baseline)
    assert status == 0
    return str(baseline)


def counts(run, *argv) -> tuple[int, dict]:
    status, out, _ = run(*argv, "--format", "json")
    return status, json.loads(out)["total"]


def test_a_baseline_entry_accepts_one_site_so_two_alike_need_it_twice(run, tmp_path):
    """three_layers' three sites share one key: a baseline with the entry once accepts one."""
    baseline = write_baseline(run, tmp_path, "three_layers.hlo.txt")
    entries = json.loads((tmp_path / "baseline.json").read_text())
    assert len(entries["sites"]) == 3
    assert len({json.dumps(e, sort_keys=True) for e in entries["sites"]}) == 1
    status, total = counts(run, DATA / "three_layers.hlo.txt", "--baseline", baseline)
    assert (status, total["new_blocked"], total["stale"]) == (0, 0, 0)
    entries["sites"] = entries["sites"][:1]
    (tmp_path / "baseline.json").write_text(json.dumps(entries))
    status, total = counts(run, DATA / "three_layers.hlo.txt", "--baseline", baseline)
    assert (status, total["new_blocked"], total["stale"]) == (1, 2, 0)


def test_a_baseline_entry_listed_twice_for_one_site_leaves_one_stale(run, tmp_path):
    baseline = write_baseline(run, tmp_path, "scanned.hlo.txt")
    entries = json.loads((tmp_path / "baseline.json").read_text())
    entries["sites"] += entries["sites"][:1]
    (tmp_path / "baseline.json").write_text(json.dumps(entries))
    status, total = counts(run, DATA / "scanned.hlo.txt", "--baseline", baseline)
    assert (status, total["new_blocked"], total["stale"]) == (0, 0, 1)
    status, _ = counts(run, DATA / "scanned.hlo.txt", "--baseline", baseline, "--strict-baseline")
    assert status == 1


def test_a_mixed_run_fails_on_its_blocked_module_and_counts_each_module(run):
    status, total = counts(run, DATA / "scanned_fixed.hlo.txt", DATA / "three_layers.hlo.txt")
    assert status == 1
    assert (total["blocked"], total["foldable"], total["new_blocked"]) == (3, 3, 3)
    assert counts(run, DATA / "scanned_fixed.hlo.txt")[0] == 0
    assert (
        counts(run, DATA / "three_layers.hlo.txt", DATA / "scanned_fixed.hlo.txt", "--exit-zero")[0]
        == 0
    )


def test_a_run_whose_only_blocked_sites_are_of_ignored_rules_passes(run):
    assert counts(run, DATA / "three_layers.hlo.txt")[0] == 1
    status, total = counts(run, DATA / "three_layers.hlo.txt", "--ignore", "FB001")
    assert (status, total["new_blocked"], total["blocked"]) == (0, 0, 3)


def test_stale_entries_fail_only_with_strict_baseline_and_only_for_modules_read(run, tmp_path):
    baseline = write_baseline(run, tmp_path, "scanned.hlo.txt")
    fixed = DATA / "scanned_fixed.hlo.txt"
    status, total = counts(run, fixed, "--baseline", baseline)
    assert (status, total["stale"]) == (0, 3)
    status, total = counts(run, fixed, "--baseline", baseline, "--strict-baseline")
    assert (status, total["stale"]) == (1, 3)
    status, total = counts(run, fixed, "--baseline", baseline, "--strict-baseline", "--exit-zero")
    assert (status, total["stale"]) == (0, 3)
    status, total = counts(run, fixed, "--baseline", baseline, "--ignore", "FB005")
    assert total["stale"] == 0  # scanned's sites are all FB005 (no cost: stacked in its loop)
    other = tmp_path / "other.hlo.txt"  # jit_step, not jit_train_step: none of its entries
    other.write_text(hlo_texts.SITES)
    status, total = counts(run, other, "--baseline", baseline, "--strict-baseline")
    assert (status, total["stale"], total["new_blocked"]) == (1, 0, 1)


def github_levels(out: str) -> list[str]:
    return [line[2:].split(" ", 1)[0] for line in out.splitlines() if line.startswith("::")]


def test_github_annotates_new_sites_as_errors_and_those_below_the_threshold_as_notices(run):
    tied = DATA / "nnx_tied.hlo.txt"
    _, total = counts(run, tied, "--min-bytes", "1")
    status, out, _ = run(tied, "--format", "github", "--min-bytes", "1")
    levels = github_levels(out)
    assert levels.count("error") == total["new_blocked"]
    assert levels.count("notice") == total["below"]
    assert total["below"] > 0
    assert status == 1


def test_github_puts_each_annotation_at_the_users_file_and_line(run):
    """Three layers through one helper: each annotation at its layer's line, not the helper's."""
    _, out, _ = run(DATA / "three_layers.hlo.txt", "--format", "json")
    expected = sorted(
        site["user_line"]
        for module in json.loads(out)["modules"]
        for site in module["sites"]
        if site["status"] == "new"
    )
    assert len(expected) == 3
    _, out, _ = run(DATA / "three_layers.hlo.txt", "--format", "github")
    found = []
    for line in out.splitlines():
        properties = dict(p.split("=", 1) for p in line.split(" ", 1)[1].split("::")[0].split(","))
        found.append(f"{_unescape(properties['file'])}:{properties['line']}")
    assert sorted(found) == expected


def _unescape(value: str) -> str:
    for escaped, plain in (("%3A", ":"), ("%2C", ","), ("%0A", "\n"), ("%0D", "\r"), ("%25", "%")):
        value = value.replace(escaped, plain)
    return value


def test_github_annotates_stale_entries_at_the_baseline_warning_or_with_strict_failing(
    run, tmp_path
):
    baseline = write_baseline(run, tmp_path, "scanned.hlo.txt", "base,line:1.json")
    fixed = DATA / "scanned_fixed.hlo.txt"
    status, out, _ = run(fixed, "--format", "github", "--baseline", baseline)
    assert (status, github_levels(out)) == (0, ["warning"] * 3)
    escaped = baseline.replace(",", "%2C").replace(":", "%3A")
    assert all(f" file={escaped}," in line for line in out.splitlines())
    assert all(",title=find-barriers FB004 " in line for line in out.splitlines())
    status, out, _ = run(fixed, "--format", "github", "--baseline", baseline, "--strict-baseline")
    assert (status, github_levels(out)) == (1, ["error"] * 3)


def test_github_escapes_data_and_properties_as_actions_reads_them():
    assert _escape("100%\r\nof a:b,c") == "100%25%0D%0Aof a:b,c"
    assert _escape("100%\r\nof a:b,c", True) == "100%25%0D%0Aof a%3Ab%2Cc"
    assert _escape("a:b,c", properties=False) == "a:b,c"


def sarif_results(run, *argv) -> tuple[int, dict]:
    status, out, _ = run(*argv, "--format", "sarif")
    return status, json.loads(out)["runs"][0]


def test_sarif_gives_each_stale_entry_a_result_of_its_rule_at_the_baseline(run, tmp_path):
    baseline = write_baseline(run, tmp_path, "scanned.hlo.txt")
    fixed = DATA / "scanned_fixed.hlo.txt"
    status, sarif = sarif_results(run, fixed, "--baseline", baseline)
    rules = [rule["id"] for rule in sarif["tool"]["driver"]["rules"]]
    stale = [r for r in sarif["results"] if r["ruleId"] == "FB004"]
    assert status == 0
    assert len(stale) == 3
    for result in stale:
        assert rules[result["ruleIndex"]] == "FB004"
        assert result["level"] == "warning"
        (location,) = result["locations"]
        assert location["physicalLocation"]["artifactLocation"]["uri"] == baseline
    fingerprints = [r["partialFingerprints"]["findBarriers/v2"] for r in stale]
    assert len(set(fingerprints)) == 3
    _, again = sarif_results(run, fixed, "--baseline", baseline)
    assert [r["partialFingerprints"]["findBarriers/v2"] for r in again["results"]] == fingerprints
    status, strict = sarif_results(run, fixed, "--baseline", baseline, "--strict-baseline")
    assert status == 1
    assert {r["level"] for r in strict["results"]} == {"error"}


def test_sarif_fingerprints_of_alike_sites_differ_and_hold_across_runs(run):
    """three_layers' sites share a baseline key; each still gets its own fingerprint."""
    dump = DATA / "three_layers.hlo.txt"
    _, first = sarif_results(run, dump)
    _, second = sarif_results(run, dump)
    prints = [r["partialFingerprints"]["findBarriers/v2"] for r in first["results"]]
    assert len(prints) == len(set(prints)) == 3
    assert prints == [r["partialFingerprints"]["findBarriers/v2"] for r in second["results"]]


def test_sarif_marks_accepted_sites_suppressed_and_new_ones_not(run, tmp_path):
    baseline = write_baseline(run, tmp_path, "scanned.hlo.txt")
    _, accepted = sarif_results(run, DATA / "scanned.hlo.txt", "--baseline", baseline)
    assert all(r["suppressions"][0]["kind"] == "external" for r in accepted["results"])
    _, new = sarif_results(run, DATA / "scanned.hlo.txt", "--min-bytes", "0")
    assert {r["level"] for r in new["results"]} == {"error"}
    assert not any("suppressions" in r for r in new["results"])


def test_path_map_splits_at_the_first_equals_sign():
    assert path_pair("/a=b=/c") == ("/a", "b=/c")
    for bad in ("/a=", "=/c", "/a"):
        with pytest.raises(argparse.ArgumentTypeError):
            path_pair(bad)


def test_a_later_dump_points_to_its_before_optimizations_file(tmp_path):
    after = tmp_path / "module_0007.jit_step.cpu_after_optimizations.txt"
    assert _before(after) == str(tmp_path / "module_0007.jit_step.before_optimizations.txt")


def test_a_files_module_name_is_xlas_or_the_file_name():
    assert module_name("d/module_0007.jit_step.before_optimizations.txt") == "jit_step"
    assert module_name("d/module_0007.jit_step.txt") == "jit_step"
    assert module_name("d/step.hlo.txt") == "step.hlo.txt"


def test_python_dash_m_reads_the_arguments_it_is_given(capsys):
    with pytest.raises(SystemExit) as exit_info:
        find_barriers.__main__.main(["--version"])
    assert exit_info.value.code == 0
    assert find_barriers.__version__ in capsys.readouterr().out


@pytest.mark.parametrize(
    ("sites", "status"),
    [
        ({"format": FORMAT}, 1),
        ({"format": FORMAT, "sites": {}}, 2),
        ({"format": FORMAT, "sites": [1]}, 2),
    ],
)
def test_a_baseline_without_sites_accepts_none_and_sites_not_entries_are_an_error(
    run, tmp_path, sites, status
):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(sites))
    assert run(DATA / "three_layers.hlo.txt", "--baseline", baseline)[0] == status


def test_a_baseline_that_is_not_an_object_is_an_error(run, tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps([FORMAT]))
    assert run(DATA / "scanned.hlo.txt", "--baseline", baseline)[0] == 2


def test_a_shard_rounds_each_split_dimension_up():
    inst = parse_instruction("x = f32[10,3]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}")
    assert shard_dims(inst) == (3, 3)
    assert shard_bytes(inst) == 4 * 9


def test_a_shard_of_an_unknown_element_type_is_priced_at_four_bytes_an_element():
    inst = parse_instruction("x = q7[8,2]{1,0} parameter(0), sharding={devices=[2,1]<=[2]}")
    assert shard_dims(inst) == (4, 2)
    assert shard_bytes(inst) == 4 * 8


def test_sarif_gives_an_entry_listed_twice_two_stale_results_with_their_own_fingerprints(
    run, tmp_path
):
    baseline = write_baseline(run, tmp_path, "scanned.hlo.txt")
    entries = json.loads((tmp_path / "baseline.json").read_text())
    entries["sites"] = entries["sites"][:1] * 2
    (tmp_path / "baseline.json").write_text(json.dumps(entries))
    _, sarif = sarif_results(run, DATA / "scanned_fixed.hlo.txt", "--baseline", baseline)
    prints = [r["partialFingerprints"]["findBarriers/v2"] for r in sarif["results"]]
    assert len(prints) == len(set(prints)) == 2
