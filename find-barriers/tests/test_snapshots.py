"""What find-barriers reports on each dump and hand-written module, field by field, against the
record in ``data/snapshots/``: every site's verdict, shapes, trips, role, placement, frames and
estimated cost, the counts and totals, the baseline it writes, and what a rerun against that
baseline and under ``--min-bytes 0`` (every blocked fold fails, FB005's too; the report itself is
at the default, 1) gives. Wording (a fix's text) is left out.

After a change meant to alter a report, rewrite the records and read their diff:
``FIND_BARRIERS_SNAPSHOTS=write pytest tests/test_snapshots.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import hlo_texts
import pytest

from conftest import DATA

SNAPSHOTS = DATA / "snapshots"
WRITE = os.environ.get("FIND_BARRIERS_SNAPSHOTS") == "write"
CASES = {
    **{path.name.removesuffix(".hlo.txt"): path.read_text() for path in DATA.glob("*.hlo.txt")},
    **{
        f"hlo_texts_{name.lower()}": getattr(hlo_texts, name)
        for name in ("SITES", "LOOP", "SHORTHAND_LOOP", "FRAMES", "ROLES")
    },
    **{
        f"hlo_texts_head_{emb}_{layout}": hlo_texts.HEAD.replace("EMB", str(emb)).replace(
            "devices=[4,1]<=[4]", devices
        )
        for emb in (512, 2048)
        for layout, devices in (("rows", "devices=[4,1]<=[4]"), ("columns", "devices=[1,4]<=[4]"))
    },
    **{
        f"hlo_texts_wide_{kernel}": hlo_texts.wide_gradient(
            kernel, hlo_texts.WIDE_SHARDING, last="s"
        )
        for kernel in hlo_texts.WIDE_KERNELS
    },
}
"""Each case's HLO text, by name: the dumps in ``data/`` and the modules of ``hlo_texts``."""


def without_wording(report: dict, folder: Path) -> dict:
    """``report`` without the version, each site's fix or its reason not to fold in words (only
    whether it has one), and with ``folder`` as ``.``."""
    report = json.loads(json.dumps(report).replace(str(folder), "."))
    del report["version"]
    for module in report["modules"]:
        for site in module["sites"]:
            del site["fix"]
            site["no_fold"] = site["no_fold"] is not None  # why, in words: only whether
    return report


def statuses(report: dict) -> list[list]:
    """Each module's sites' statuses, in order."""
    return [[site["status"] for site in module["sites"]] for module in report["modules"]]


def snapshot(text: str, folder: Path, run) -> dict:
    """What find-barriers says of ``text``, as a module file in ``folder``."""
    module, baseline = folder / "module.hlo.txt", folder / "baseline.json"
    module.write_text(text)
    json_verbose = ("--format", "json", "--verbose", "--all-modules", module)
    status, out, _ = run(*json_verbose, "--write-baseline", baseline)
    report = json.loads(out)
    assert report["exit_status"] == status == 0
    written = json.loads(baseline.read_text())
    rerun_status, rerun, _ = run(*json_verbose, "--baseline", baseline)
    plain_status, plain, _ = run(*json_verbose)
    every_status, every, _ = run(*json_verbose, "--min-bytes", "0")
    return {
        "report": without_wording(json.loads(plain), folder),
        "exit_status": plain_status,
        "baseline": written,
        "against_baseline": {
            "exit_status": rerun_status,
            "statuses": statuses(json.loads(rerun)),
            "total": json.loads(rerun)["total"],
        },
        "min_bytes_0": {
            "exit_status": every_status,
            "statuses": statuses(json.loads(every)),
            "total": json.loads(every)["total"],
        },
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_report_of_each_module_is_its_record(name, tmp_path, run):
    found = snapshot(CASES[name], tmp_path, run)
    record = SNAPSHOTS / f"{name}.json"
    if WRITE:
        SNAPSHOTS.mkdir(exist_ok=True)
        record.write_text(json.dumps(found, indent=1) + "\n")
    assert found == json.loads(record.read_text())


def test_every_record_is_of_a_case():
    assert {path.name.removesuffix(".json") for path in SNAPSHOTS.glob("*.json")} == set(CASES)
