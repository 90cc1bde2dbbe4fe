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
from importlib.resources import files
from pathlib import Path
from typing import Any

from find_barriers.program import read_hlo
from find_barriers.sites import TransposeSite, find_sites

TOPOLOGY = "v5p-8"
"""MaxText's name for the slice the doc measured on: four v5p chips."""
_TPU_ARGUMENTS = [f"compile_topology={TOPOLOGY}", "compile_topology_num_slices=1"]
_COMMON_ARGUMENTS = ["dataset_type=synthetic", "enable_checkpointing=False", "jax_cache_dir="]
_CPU_ARGUMENTS = ["hardware=cpu", "attention=dot_product"]
"""XLA:CPU has no TPU attention kernel: the CPU compile uses MaxText's plain dot-product one."""
_COMPILE_SECONDS = 900
ONE_OF_MANY = {"ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
"""libtpu takes a lock on the machine (``/tmp/libtpu_lockfile``) unless told other processes use it
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
    texts are also written there, gzipped, as ``{cpu|tpu}_{mode}_{before|after}.txt.gz``."""
    base = files("maxtext").joinpath("configs", "base.yml")
    arguments = [*overrides(config), f"shard_mode={mode}", *_TPU_ARGUMENTS, *_COMMON_ARGUMENTS]
    arguments += _CPU_ARGUMENTS if cpu else []
    with tempfile.TemporaryDirectory() as dump:
        flags = f"--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_hlo_module_re=train_step"
        environment = os.environ | {"JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags} | ONE_OF_MANY
        command = [sys.executable, "-m", "snippets.measure._maxtext_compile"]
        command += ["--cpu"] * cpu + [str(base), *arguments]
        run = subprocess.run(
            command,
            env=environment,
            capture_output=True,
            text=True,
            timeout=_COMPILE_SECONDS,
            check=False,
        )
        if run.returncode:
            raise RuntimeError(f"{config['name']} ({mode}) did not compile: {run.stderr[-2000:]}")
        found = {"optimal_seconds": json.loads(run.stdout.strip().splitlines()[-1])}
        for stage in ("before", "after"):
            (path,) = Path(dump).glob(f"*train_step*.{_stage_suffix(stage, cpu)}.txt")
            found[stage] = path.read_text()
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                name = f"{'cpu' if cpu else 'tpu'}_{mode}_{stage}.txt.gz"
                (keep / name).write_bytes(gzip.compress(found[stage].encode()))
    found["optimal_seconds"] = found["optimal_seconds"]["optimal_seconds"]
    return found


def _stage_suffix(stage: str, cpu: bool) -> str:
    """The dump file's name for a stage: ``before_optimizations``, or the compiled module (XLA:CPU
    names it ``cpu_after_optimizations``)."""
    return "before_optimizations" if stage == "before" else f"{'cpu_' * cpu}after_optimizations"


def blocked_sites(before: str) -> list[TransposeSite]:
    """find-barriers' blocked sites of the module JAX hands XLA."""
    return [site for site in find_sites(read_hlo(before)) if site.blocked]
