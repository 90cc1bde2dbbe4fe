"""MaxText's decoder: its CLI, the sites in both modes, the causal control and the compiled relayouts."""

import importlib
import json
import os
import subprocess
import sys

import pytest

from snippets.hlo.maxtext_decoder import (
    DecoderConfig,
    grouped,
    import_maxtext,
    lower_decoder,
    maxtext_config,
    mode_report,
)
from snippets.measure import maxtext_decoder
from snippets.support.cli import SetupError

HEAD = "decoder/logits_dense/kernel"
MLP = {f"decoder/layers_0/mlp/{name}/kernel" for name in ("wi_0", "wi_1", "wo")}


@pytest.fixture(scope="module")
def fresh_process() -> tuple[dict, str]:
    """``python -m snippets maxtext_decoder --json --causal --compiled`` with the defaults (the
    issue's config), for real: one fresh process builds MaxText's model for every test here.
    It runs the command as ``-m`` does (:mod:`runpy`), then prints Flax's
    ``flax_always_shard_variable``: the report, and that setting as text."""
    code = (
        "import runpy, sys; sys.argv[1:] = ['maxtext_decoder', '--json', '--causal', '--compiled']; "
        "runpy.run_module('snippets', run_name='__main__', alter_sys=True); "
        "from flax import config; print(config.flax_always_shard_variable)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == ""  # MaxText's and transformers' log lines are kept quiet
    report, setting = result.stdout.rstrip().rsplit("\n", 1)
    return json.loads(report), setting


@pytest.fixture(scope="module")
def cli_report(fresh_process) -> dict:
    """The command's JSON report."""
    return fresh_process[0]


def test_explicit_mode_has_more_sharding_calls_and_the_same_sites(cli_report):
    explicit, auto = cli_report["explicit"], cli_report["auto"]
    assert explicit["sharding_calls"] > auto["sharding_calls"]
    same = ("shapes", "parameter", "op_name", "source")
    assert [[s[k] for k in same] for s in explicit["sites"]] == [
        [s[k] for k in same] for s in auto["sites"]
    ]
    assert explicit["sites"], "no transpose-of-dot site found"


def test_every_explicit_site_has_a_sharding_call_between_and_no_auto_site_has(cli_report):
    assert all("Sharding" in site["between"] for site in cli_report["explicit"]["sites"])
    assert not any("Sharding" in site["between"] for site in cli_report["auto"]["sites"])


def test_the_head_and_every_layer_kernel_have_a_site(cli_report):
    sites = {site["parameter"]: site for site in cli_report["explicit"]["sites"]}
    assert sites[HEAD]["shapes"] == ["f32[512,128]", "f32[128,512]"]
    kernels = {
        f"decoder/layers_0/self_attention/{n}/kernel" for n in ("query", "key", "value", "out")
    }
    assert MLP | kernels | {HEAD} <= set(sites)


def test_the_causal_control_folds_the_head_and_mlp_in_auto_only(cli_report):
    for mode in ("explicit", "auto"):
        assert all(isinstance(site["folded"], bool) for site in cli_report[mode]["sites"])
    folded = {
        mode: {s["parameter"] for s in cli_report[mode]["sites"] if s["folded"]}
        for mode in ("explicit", "auto")
    }
    assert folded == {"explicit": set(), "auto": MLP | {HEAD}}
    multiplies = [s for s in cli_report["auto"]["sites"] if "multiply" in s["after_algsimp"]]
    assert multiplies
    assert not any(s["folded"] for s in multiplies)


@pytest.mark.needs_devices(4)
def test_other_sizes_scanned_layers_and_an_fsdp_mesh():
    config = DecoderConfig(emb=64, vocab=1000, layers=3, scan=True, mesh="dp_fsdp")
    reports = {mode: mode_report(lower_decoder(config, mode)) for mode in ("explicit", "auto")}
    sites = {site["parameter"]: site for site in reports["explicit"]["sites"]}
    assert sites[HEAD]["shapes"] == ["f32[1000,64]", "f32[64,1000]"]
    assert "decoder/layers/mlp/wi_0/kernel" in sites  # one stacked parameter for the 3 layers
    assert all(site["between"] == [] for site in reports["auto"]["sites"])


def test_each_kernel_gradient_leaves_through_one_real_copy_when_compiled(cli_report):
    relayouts = cli_report["auto"]["gradient_relayouts"]
    for name in MLP | {HEAD}:
        assert sum(op["moves_data"] for op in relayouts[name]) == 1, relayouts[name]
    assert cli_report["explicit"]["gradient_relayouts"] == relayouts  # as on CPU, both modes alike


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--emb", "0"], ["argument --emb", "at least 1", "'0'"]),
        (["--layers", "two"], ["argument --layers", "whole number", "'two'"]),
        (["--mesh", "tp"], ["argument --mesh", "invalid choice: 'tp'"]),
        (
            ["--mesh", "dp_fsdp", "--emb", "127"],
            ["emb 127 does not divide over the mesh's fsdp axis"],
        ),
    ],
)
def test_bad_flags_give_one_error_line(argv, words, one_error_line):
    line = one_error_line(maxtext_decoder.main, argv)
    assert all(word in line for word in words), line


def test_a_missing_package_is_named(monkeypatch):
    real = importlib.import_module

    def without_omegaconf(name, *args):
        if name.startswith("maxtext."):
            raise ModuleNotFoundError("No module named 'omegaconf'", name="omegaconf")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_omegaconf)
    with pytest.raises(SetupError, match="the package 'omegaconf' is missing"):
        import_maxtext()


def test_grouped_merges_layers_and_counts():
    site = {"parameter": "decoder/layers_0/mlp/wo/kernel", "op_name": None, "shapes": ["a", "b"]}
    rows = grouped([site, {**site, "parameter": "decoder/layers_1/mlp/wo/kernel"}])
    assert rows == [{"site": "mlp/wo", "dot": "a", "transpose": "b", "count": 2}]


@pytest.mark.parametrize("flags", [None, "--xla_cpu_enable_fast_math=false"])
def test_maxtext_config_leaves_xla_flags_as_they_were(monkeypatch, flags):
    """MaxText's config sets XLA_FLAGS to dump every module when it is unset; not for us."""
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    if flags is not None:
        monkeypatch.setenv("XLA_FLAGS", flags)
    maxtext_config(DecoderConfig(), "explicit")
    assert os.environ.get("XLA_FLAGS") == flags


def test_importing_maxtext_leaves_flax_sharding_on(fresh_process):
    """MaxText's import turns flax_always_shard_variable off for the process; it is put back.

    In the fresh process that ran the command line, where MaxText was imported for the first
    time, read after the run."""
    assert fresh_process[1] == "True"
