"""The design doc's 25 configs compiled here for a TPU v5p slice, with no TPU: MaxText 0.2.5's own
training step, given each config's overrides, compiled by libtpu for ``v5p-8`` in each shard
mode, and by XLA:CPU for find-barriers to read. What each config's explicit mode adds is read from
the compiled programs: the entry's copies, the reduce-scatters, XLA's ``optimal_seconds``.

The configs, the doc's figures for each and the words they come from are
``field_configs.toml`` beside this module (revision 37ba11cc of the doc).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from importlib.resources import files
from pathlib import Path
from typing import Any

from find_barriers import Module, check_module, read_hlo, rule_of

RECORD = Path(__file__).with_name("field_record.json")
"""Where ``nox -s field`` records the field, which the MaxText guide renders.

:meta hide-value:
"""
TOPOLOGY = "v5p-8"
"""MaxText's name for the slice the doc measured on: four v5p chips."""
_TPU_ARGUMENTS = [f"compile_topology={TOPOLOGY}", "compile_topology_num_slices=1"]
_COMMON_ARGUMENTS = ["dataset_type=synthetic", "enable_checkpointing=False", "jax_cache_dir="]
_CPU_ARGUMENTS = ["hardware=cpu", "attention=dot_product"]
"""XLA:CPU has no TPU attention kernel: the CPU compile uses MaxText's plain dot-product one."""
_COMPILE_SECONDS = 900
ONE_OF_MANY = {"ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
"""libtpu takes a lock file on the machine unless told other processes use it
too: compiling, not running, needs no lock."""


@functools.cache
def field_configs() -> dict[str, Any]:
    """``field_configs.toml``: ``source`` (the doc, its shrink) and each ``config``."""
    return tomllib.loads(files("snippets.hlo").joinpath("field_configs.toml").read_text())


def overrides(config: dict) -> list[str]:
    """MaxText's ``KEY=VALUE`` arguments for ``config``: the doc's shrink, then the config's own
    (a key given twice keeps the config's value)."""
    merged = dict(item.split("=", 1) for item in field_configs()["source"]["shrink"].split())
    merged |= dict(item.split("=", 1) for item in config["overrides"])
    return [f"model_name={config['model_name']}", *(f"{k}={v}" for k, v in merged.items())]


def compile_config(
    config: dict, mode: str, cpu: bool = False, keep: Path | None = None
) -> dict[str, Any]:
    """``config``'s step in ``mode`` compiled in a process of its own, for ``v5p-8`` or, with
    ``cpu``, for XLA:CPU on four simulated devices: ``optimal_seconds`` and the dumped texts
    ``before`` (the module JAX hands XLA) and ``after`` (the compiled one); with ``keep``, the
    texts are also written there, gzipped, as ``{cpu|tpu}_{mode}_{before|after}.txt.gz``. Where
    XLA:CPU cannot compile the step (an expert-parallel step's ``ragged-all-to-all``), ``before``
    is still written; ``cpu_compile_error`` gives XLA's last line and ``after`` is None."""
    base = files("maxtext").joinpath("configs", "base.yml")
    arguments = [*overrides(config), f"shard_mode={mode}", *_TPU_ARGUMENTS, *_COMMON_ARGUMENTS]
    arguments += _CPU_ARGUMENTS if cpu else []
    with tempfile.TemporaryDirectory() as dump:
        flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=train_step"
        environment = os.environ | {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags} | ONE_OF_MANY
        command = [sys.executable, "-m", "snippets", "maxtext_compile"]
        command += ["--cpu"] * cpu + [str(base), *arguments]
        run = subprocess.run(
            command,
            env=environment,
            capture_output=True,
            text=True,
            timeout=_COMPILE_SECONDS,
            check=False,
        )
        dumped = {
            stage: sorted(Path(dump).glob(f"*train_step*.{_stage_suffix(stage, cpu)}.txt"))
            for stage in ("before", "after")
        }
        if run.returncode and not (cpu and dumped["before"]):
            raise RuntimeError(f"{config['name']} ({mode}) did not compile: {run.stderr[-2000:]}")
        found: dict[str, Any] = {"optimal_seconds": None, "cpu_compile_error": None}
        if run.returncode:  # XLA:CPU lacks some TPU ops; find-barriers reads what it was handed
            found["cpu_compile_error"] = run.stderr.strip().splitlines()[-1]
        else:
            found["optimal_seconds"] = json.loads(run.stdout.strip().splitlines()[-1])
            found["optimal_seconds"] = found["optimal_seconds"]["optimal_seconds"]
        for stage, paths in dumped.items():
            found[stage] = paths[0].read_text() if paths else None
            if keep is not None and paths:
                keep.mkdir(parents=True, exist_ok=True)
                name = f"{'cpu' if cpu else 'tpu'}_{mode}_{stage}.txt.gz"
                (keep / name).write_bytes(gzip.compress(found[stage].encode()))
    return found


def _stage_suffix(stage: str, cpu: bool) -> str:
    """The dump file's name for a stage: ``before_optimizations``, or the compiled module (XLA:CPU
    names it ``cpu_after_optimizations``)."""
    return "before_optimizations" if stage == "before" else f"{'cpu_' * cpu}after_optimizations"


def recorded_field() -> dict[str, Any]:
    """The field as ``nox -s field`` last recorded it (:data:`RECORD`)."""
    return json.loads(RECORD.read_text())


def kept_dump(folder: Path, name: str) -> str:
    """A dump :func:`compile_config` kept: ``name`` is ``{cpu|tpu}_{mode}_{before|after}``."""
    return gzip.decompress((folder / f"{name}.txt.gz").read_bytes()).decode()


def find_barriers_facts(before: str) -> dict[str, Any]:
    """What find-barriers says of the module JAX hands XLA, as its command line would: its blocked
    sites by rule, their estimated relayout-copy and lost reduce-scatter bytes a step
    (:class:`find_barriers.Cost`), the parameters blocked, and its exit status (a weight gradient
    the estimate prices at nothing, ``FB005``, does not fail)."""
    checked = check_module(Module("before_optimizations", read_hlo(before)), Counter())
    sites = [finding.site for finding in checked.findings if finding.status is not None]
    rules = [rule.code for site in sites if (rule := rule_of(site))]
    costs = [site.cost for site in sites if site.cost is not None]
    return {
        "blocked": len(sites),
        "rules": {code: rules.count(code) for code in sorted(set(rules))},
        "relayout_copy_bytes": sum(cost.relayout_copy_bytes for cost in costs),
        "lost_reduce_scatter_bytes": sum(cost.lost_reduce_scatter_bytes for cost in costs),
        "parameters": sorted({site.parameter for site in sites if site.parameter}),
        "exit_status": int(bool(checked.new)),
    }


def field_rows(record: dict) -> list[dict[str, Any]]:
    """Each config of a field ``record`` beside the design doc's figures: the copy bytes the doc
    states (MB, or None) and those the TPU compile adds (explicit's entry copies of parameters
    and optimizer states over auto's, and of anything else), all read and written; find-barriers' estimate from the CPU dump; the reduce-scatters in each
    mode (and the doc's, for the four models its item 03 lists); XLA's ``optimal_seconds`` ratio
    and the doc's measured step-time change; and XLA:CPU's error, where it could not compile."""
    doc = {config["name"]: config for config in field_configs()["config"]}
    rows = []
    for found in record["configs"]:
        config = doc[found["name"]]
        explicit, auto, checked = found["explicit"], found["auto"], found["find_barriers"]
        stated = config.get("reduce_scatters")
        rows.append(
            {
                "config": found["name"],
                "section": config["section"],
                "url": config["url"],
                "doc_copy_mb": config.get("stated_traffic_mb", config.get("stated_copy_mb")),
                "compiled_copy_mb": (explicit["relayout_traffic"] - auto["relayout_traffic"]) / 1e6,
                "other_copy_mb": (
                    explicit["copy_traffic"]
                    - auto["copy_traffic"]
                    - explicit["relayout_traffic"]
                    + auto["relayout_traffic"]
                )
                / 1e6,
                "estimate_mb": checked["relayout_copy_bytes"] / 1e6,
                "reduce_scatters": (auto["reduce_scatters"], explicit["reduce_scatters"]),
                "doc_reduce_scatters": stated and (stated["auto"], stated["explicit"]),
                "lost_reduce_scatter_mb": checked["lost_reduce_scatter_bytes"] / 1e6,
                "doc_lost_reduce_scatter": config["lost_reduce_scatter"],
                "optimal_ratio": explicit["optimal_seconds"] / auto["optimal_seconds"],
                "doc_step_delta_pct": config["step_delta_pct"],
                "exit_status": checked["exit_status"],
                "cpu_compile_error": found.get("cpu_compile_error"),
            }
        )
    return rows
