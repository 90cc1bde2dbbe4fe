"""XLA's own dumps of steps a user would write (``data/``): a stack of layers scanned with
``nnx.scan`` under gradient accumulation, and three layers through one shared helper."""

import json

from conftest import MODEL, SHARED_DOT_LINE, THREE_LAYER_LINES
from find_barriers import read_module
from find_barriers._sites import find_sites


def sites_of(data, name: str):
    return find_sites(read_module(str(data / name)))


def test_every_weight_gradient_of_a_scanned_accumulated_step_is_named_and_counted(data):
    sites = sites_of(data, "scanned.hlo.txt")
    named = {site.parameter: site.trips for site in sites}
    assert named == {
        "params['blocks']['up']['kernel'].value": 6,  # 3 layers x 2 micro-batches
        "params['blocks']['down']['kernel'].value": 6,
        "params['head']['kernel'].value": 2,  # once per micro-batch
    }
    assert {(site.role, site.verdict) for site in sites} == {("weight gradient", "blocked")}


def test_the_kernel_order_fix_leaves_each_weight_gradient_foldable_and_the_gate_open(data, run):
    """The gate at ``--min-bytes 0``: the scan's blocked folds cost nothing by the estimate
    (FB005), so only there do they fail it."""
    sites = sites_of(data, "scanned_fixed.hlo.txt")
    assert {site.parameter: site.verdict for site in sites} == {
        "params['blocks']['up']['kernel'].value": "foldable",
        "params['blocks']['down']['kernel'].value": "foldable",
        "params['head']['kernel'].value": "foldable",
    }
    assert run(data / "scanned_fixed.hlo.txt", "--min-bytes", "0")[0] == 0
    assert run(data / "scanned.hlo.txt", "--min-bytes", "0")[0] == 1


def test_three_layers_through_one_helper_are_three_sites_at_three_lines(data, run):
    sites = sites_of(data, "three_layers.hlo.txt")
    assert [site.where for site in sites] == [
        f"{MODEL}:{line} via {MODEL}:{SHARED_DOT_LINE}" for line in THREE_LAYER_LINES
    ]
    status, out, _ = run("--format", "sarif", data / "three_layers.hlo.txt")
    results = json.loads(out)["runs"][0]["results"]
    lines = [
        result["locations"][0]["physicalLocation"]["region"]["startLine"] for result in results
    ]
    fingerprints = {result["partialFingerprints"]["findBarriers/v2"] for result in results}
    assert (status, sorted(lines), len(fingerprints)) == (1, list(THREE_LAYER_LINES), 3)


def test_a_baseline_holds_when_a_line_is_added_above_the_model(data, run, tmp_path):
    """The scanned step names its parameters (keyed by them), the three layers do not (keyed by
    the user's functions): a comment line at the model's top moves every line, no key. Under
    ``--min-bytes 0``, so that the scan's sites (FB005, no cost) would fail unless accepted."""
    for name in ("scanned", "three_layers"):
        baseline = tmp_path / f"{name}.json"
        shifted = data / f"{name}_shifted.hlo.txt"
        assert run(data / f"{name}.hlo.txt", "--write-baseline", baseline)[0] == 0
        assert run(shifted, "--min-bytes", "0")[0] == 1
        assert run(shifted, "--baseline", baseline, "--min-bytes", "0")[0] == 0
        moved = [site.where for site in sites_of(data, f"{name}_shifted.hlo.txt")]
        assert moved != [site.where for site in sites_of(data, f"{name}.hlo.txt")]


def test_a_renamed_parameter_is_a_new_site(data, run, tmp_path):
    baseline = tmp_path / "baseline.json"
    run(data / "scanned.hlo.txt", "--write-baseline", baseline)
    renamed = tmp_path / "renamed.hlo.txt"
    renamed.write_text(
        (data / "scanned.hlo.txt").read_text().replace(r"[\'head\']", r"[\'output\']")
    )
    status, out, _ = run(renamed, "--baseline", baseline, "--quiet", "--min-bytes", "0")
    new, stale = out.splitlines()
    assert status == 1
    assert (new.count("FB005"), "params['output']['kernel']" in new) == (1, True)
    assert (
        stale
        == f"{baseline}: FB004 jit_train_step FB005 params['head']['kernel'].value: dot f32[64,32] -> transpose f32[32,64]"
    )
