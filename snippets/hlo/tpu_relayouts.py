"""The flagship's step, its LM head as stored and with its weight gradient in kernel order,
compiled for a TPU v5p slice on this machine (libtpu, no TPU) in each shard mode: the entry's
copies, those of the head kernel, and the reduce-scatters (:mod:`snippets.hlo.compiled`). A
guide built without libtpu renders what ``python -m snippets tpu_relayouts --record`` wrote,
and says so; ``nox -s tpu`` checks a fresh compile against that record.
"""

from __future__ import annotations

import datetime
import json
from importlib.metadata import version
from pathlib import Path

from snippets.devices import SHARD_MODES
from snippets.hlo.compiled import compiled_facts
from snippets.lowering import StepConfig, build_step
from snippets.tpu_compile import TOPOLOGY, compile_for_tpu, libtpu_version

RECORD = Path(__file__).with_name("tpu_relayouts_record.json")
"""Where ``--record`` writes the compiled facts, for a guide built without libtpu.

:meta hide-value:
"""
STEP = StepConfig(mesh="fsdp", emb=512, vocab=32000, batch=8, seq=128, optimizer="adam")
"""The flagship's step at the design doc's head (emb 512, vocab 32,000, fsdp 4), with adamw."""
VARIANTS = ("EV", "auto-axes")
"""The head as stored, and fix 1: its weight gradient in kernel order under ``auto_axes``."""


def compile_runs(base: StepConfig = STEP) -> dict:
    """Each variant in each shard mode, compiled for :data:`~snippets.tpu_compile.TOPOLOGY`."""
    return {
        f"{variant} {mode}": compiled_facts(
            compile_for_tpu(build_step(base.replace(mode=mode, variant=variant))), base.kernel_dims
        )
        for variant in VARIANTS
        for mode in SHARD_MODES
    }


def record(facts: dict) -> dict:
    """``facts`` with what made them: the topology, the step, the versions and the date."""
    return {
        "topology": TOPOLOGY,
        "step": STEP.model_dump(),
        "versions": {"jax": version("jax"), "libtpu": libtpu_version()},
        "made": datetime.date.today().isoformat(),
        "compiled": facts,
    }


def compiled_here_or_recorded() -> tuple[dict, bool]:
    """The compiled facts with what made them, and whether they were compiled here (libtpu
    installed) rather than read from :data:`RECORD`."""
    if libtpu_version() is None:
        return json.loads(RECORD.read_text()), False
    return record(compile_runs()), True
