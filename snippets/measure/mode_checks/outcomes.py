"""A check's outcome under one mesh axis type: ``ok`` (``ok: what it read``) or its whole error,
source locations and addresses normalised; or how the fresh interpreter it ran in ended.
:func:`report` gives every registered check's outcome in both modes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
from jax.sharding import AxisType

from snippets.cache.results import shared
from snippets.devices import SHARD_MODES
from snippets.measure.mode_checks.registry import CHECKS, ISOLATED, Check

SOURCE = re.compile(r"(?:/[^\s:()]+)+\.py:\d+(?::\d+)?")
"""A Python source location, ``/path/file.py:LINE[:COLUMN]``: JAX names the caller's line."""


ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
"""A memory address, as a ``repr`` prints it."""


GLOG_PREFIX = re.compile(r"^[FEWI]\d{4} [\d:.]+\s+\d+ ", re.MULTILINE)
"""A C++ log line's severity, date, time and thread id (XLA logs a failed check this way)."""


def message(error: BaseException) -> str:
    """The error's type and whole message, with source locations and addresses normalised.

    >>> message(ValueError("bad spec. This error occurs at source:  /a/b.py:3:7 (f)\\nmore"))
    'ValueError: bad spec. This error occurs at source:  <source> (f)\\nmore'
    """
    text = ADDRESS.sub("0x...", SOURCE.sub("<source>", str(error).strip()))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def outcome(check: Check, axis_type: AxisType) -> str:
    """``ok`` (``ok: what it read``) if ``check`` runs under ``axis_type``, else its error."""
    try:
        seen = check(axis_type)
    except Exception as error:  # noqa: BLE001 (every error is an outcome to record)
        return message(error)
    return "ok" if seen is None else f"ok: {seen}"


def isolated_outcome(check: Check, axis_type: AxisType) -> str:
    """:func:`outcome` in a fresh interpreter with this one's CPU devices (it imports ``check`` by
    name), so that a program aborting it (as jax-ml/jax#29162's did) ends only that one."""
    code = (
        "import importlib, json, sys; from jax.sharding import AxisType; "
        "from snippets.measure.mode_checks.outcomes import outcome; "
        "check = getattr(importlib.import_module(sys.argv[1]), sys.argv[2]); "
        "print(json.dumps(outcome(check, AxisType[sys.argv[3]])))"
    )
    command = [sys.executable, "-c", code, check.__module__, check.__name__, axis_type.name]
    env = os.environ | {"JAX_NUM_CPU_DEVICES": str(len(jax.devices("cpu")))}
    root = Path(__file__).resolve().parents[3]  # holds the snippets package
    result = subprocess.run(command, capture_output=True, text=True, cwd=root, env=env, check=False)
    if result.returncode == 0:
        return json.loads(result.stdout.splitlines()[-1])
    return aborted(result.returncode, result.stderr)


def aborted(returncode: int, stderr: str) -> str:
    """The outcome of an interpreter that ended without one: how it ended and its last log line.

    >>> aborted(-6, "F1201 22:30:11.527553    6585 hlo_sharding.cc:1004] Check failed\\n")
    'Aborted: signal SIGABRT: hlo_sharding.cc:1004] Check failed'
    """
    ended = f"signal {signal.Signals(-returncode).name}" if returncode < 0 else f"exit {returncode}"
    last = GLOG_PREFIX.sub("", (stderr.strip().splitlines() or [""])[-1])
    return f"Aborted: {ended}: {SOURCE.sub('<source>', last)}"


def short(result: str) -> str:
    """An outcome for a table cell: ``ok`` and what was read, or just the error's type.

    >>> short("ShardingTypeError: dot_general operation ..."), short("ok: float32[8@x,8]")
    ('ShardingTypeError', 'ok: float32[8@x,8]')
    """
    return result if result.startswith("ok") else result.partition(":")[0]


@shared
def report(names: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
    """``{name: {"explicit": outcome, "auto": outcome}}`` for the named checks (default: all)."""
    return {
        name: {
            mode: (isolated_outcome if name in ISOLATED else outcome)(CHECKS[name], axis_type)
            for mode, axis_type in SHARD_MODES.items()
        }
        for name in names or CHECKS
    }
