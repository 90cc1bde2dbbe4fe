"""The baseline file: what keys a blocked site, what a stale entry names, how a file is read and
matched, whatever the order of its entries' keys."""

from __future__ import annotations

import json
import re
from pathlib import Path

import hlo_texts
import pytest

from conftest import DATA
from find_barriers import read_hlo
from find_barriers._baseline import FORMAT, describe, key, load, model_frames
from find_barriers._dumps import Module
from find_barriers._program import Frame
from find_barriers._sites import TransposeSite

INSTALLED = "/venv/lib/python3.12/site-packages/pkg/model.py"
"""A user file read the same from any working directory (from its package: ``pkg/model.py``)."""


def blocked_site(*stack: Frame) -> TransposeSite:
    """A blocked weight gradient named by no parameter, made at ``stack`` (innermost first)."""
    return TransposeSite("t", "f32[2,8]", "d", ("Sharding",), dot_shape="f32[8,2]", stack=stack)


def test_an_unnamed_frame_is_keyed_by_its_file_and_line():
    """A frame whose function the module does not name keys the site by ``file:line``."""
    module = Module("step.hlo.txt", read_hlo(hlo_texts.SITES))  # jit_step: "step" is jitted
    site = blocked_site(Frame(INSTALLED, 9), Frame(INSTALLED, 30, "step"), Frame(INSTALLED, 40))
    entry = key(module, site)
    assert (entry["module"], entry["rule"], entry["parameter"]) == ("jit_step", "FB001", None)
    assert entry["functions"] == ["pkg/model.py:9", "step"]


def test_without_the_jitted_function_every_frame_but_a_scripts_top_level_is_the_models():
    layer, helper = Frame("m.py", 5, "Layer.__call__"), Frame("m.py", 9, "helper")
    top = Frame("train.py", 30, "<module>")
    assert model_frames("jit_train_step", [layer, top, helper]) == [layer, helper]
    assert model_frames("jit_train_step", [top]) == []


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        ({"parameter": "params['w']", "functions": None}, "params['w']"),
        (
            {"parameter": None, "functions": ["Layer.__call__", "train_step"]},
            "Layer.__call__ < train_step",
        ),
        ({"parameter": None, "functions": ["train_step"]}, "train_step"),
        ({"parameter": None, "functions": []}, "?"),
        ({"parameter": None, "functions": None}, "?"),
    ],
)
def test_a_stale_entry_is_named_by_its_parameter_else_its_functions_innermost_first(entry, named):
    """Its parameter's path, else its functions from the site out, joined by ``<``, else ``?``."""
    entry = {"module": "jit_train_step", "rule": "FB001", **entry}
    entry |= {"dot": "f32[8,2]", "transpose": "f32[2,8]"}
    assert describe(entry).startswith(f"jit_train_step FB001 {named}: ")


def test_a_baseline_file_not_an_object_is_a_value_error(tmp_path):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps([FORMAT]))
    with pytest.raises(ValueError, match="baseline"):
        load(str(baseline))


def test_an_unreadable_baseline_file_is_a_value_error_naming_it(tmp_path, monkeypatch):
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"format": FORMAT, "sites": []}))

    def denied(self, *args):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)
    with pytest.raises(ValueError, match=f"^{re.escape(str(baseline))}: "):
        load(str(baseline))


def test_a_baseline_matches_whatever_the_order_of_its_entries_keys(run, tmp_path):
    """An entry is compared as a whole: a file rewritten with its keys in another order still
    accepts every site."""
    baseline = tmp_path / "baseline.json"
    assert run(DATA / "scanned.hlo.txt", "--write-baseline", baseline)[0] == 0
    written = json.loads(baseline.read_text())
    written["sites"] = [dict(reversed(entry.items())) for entry in written["sites"]]
    baseline.write_text(json.dumps(written))
    status, out, _ = run(DATA / "scanned.hlo.txt", "--baseline", baseline, "--format", "json")
    total = json.loads(out)["total"]
    assert (status, total["blocked"], total["new_blocked"], total["stale"]) == (0, 3, 0, 0)
