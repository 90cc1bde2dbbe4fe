"""Accepted sites: ``--write-baseline FILE`` records today's blocked sites, ``--baseline FILE``
accepts them, so only new ones fail; each keyed by what survives a recompile (:func:`key`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from find_barriers.dumps import Module
from find_barriers.frames import readable
from find_barriers.rules import rule_of
from find_barriers.sites import TransposeSite

FORMAT = "find-barriers-baseline/2"
_FLAT_INDEX = re.compile(r"^[\w.]*(\[\d+\])+$")
"""A name that is only a position in a flattened state (``model.states[0][32]``): it shifts when a
layer is added, so it is not a key."""


def key(module: Module, site: TransposeSite) -> dict:
    """What identifies ``site`` across recompiles and edits elsewhere in the model: its module's
    name, rule and shapes, and the parameter where the module names it by path, else the functions
    of the user's stack, innermost first (a frame's line only where it names no function)."""
    named = site.parameter if site.parameter and not _FLAT_INDEX.match(site.parameter) else None
    rule = rule_of(site)
    return {
        "module": module.name,
        "rule": rule.code if rule else None,
        "parameter": named,
        "functions": None if named else [f.function or readable(f) for f in site.user_stack],
        "dot": site.dot_shape,
        "transpose": site.shape,
    }


def tag(entry: dict) -> str:
    """A key as one string, to count and compare."""
    return json.dumps(entry, sort_keys=True)


def write(path: str, blocked: Iterable[tuple[Module, TransposeSite]]) -> None:
    """Record the blocked sites given (each counted, so two alike are two)."""
    entries = [key(module, site) for module, site in blocked]
    try:
        Path(path).write_text(json.dumps({"format": FORMAT, "sites": entries}, indent=2) + "\n")
    except OSError as error:
        raise ValueError(f"{path}: cannot write the baseline there ({error.strerror})") from None


def load(path: str) -> Counter:
    """A baseline file's accepted sites as counts of :func:`tag`; a ValueError says what's wrong."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{path}: no such baseline file; write one with --write-baseline {path}")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a baseline (not JSON: {error})") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != FORMAT:
        stale = str(found).startswith("find-barriers")  # an older format of this tool's
        older = f" (it is {found}: write it again)" if stale else ""
        raise ValueError(f"{path}: not a {FORMAT} baseline{older}; use --write-baseline {path}")
    return Counter(tag(entry) for entry in data.get("sites", []))
