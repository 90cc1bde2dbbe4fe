"""Accepted sites: ``--write-baseline FILE`` records today's blocked sites, ``--baseline FILE``
accepts them, so only new ones fail; each keyed by what survives a recompile, an edit elsewhere
in the model and a move of the code that runs the step (:func:`key`)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from find_barriers._dumps import Module
from find_barriers._frames import readable
from find_barriers._program import Frame
from find_barriers._rules import rule_of
from find_barriers._sites import TransposeSite

FORMAT = "find-barriers-baseline/3"


def model_frames(module_name: str, stack: Sequence[Frame]) -> list[Frame]:
    """The frames of a user stack (innermost first) from the site out to the jitted function,
    the one the module is named after (``train_step`` for ``jit_train_step``): what called the
    step is left out. Where no frame is that function, every frame but a script's top level.

    >>> step, main = Frame("t.py", 9, "make.<locals>.train_step"), Frame("t.py", 30, "main")
    >>> [f.function for f in model_frames("jit_train_step", [Frame("m.py", 5, "M.__call__"), step, main])]
    ['M.__call__', 'make.<locals>.train_step']
    """
    jitted = re.sub(r"^[a-z]+_", "", module_name)
    for end, frame in enumerate(stack):
        if frame.function.rpartition(".")[2] == jitted:
            return list(stack[: end + 1])
    return [frame for frame in stack if frame.function != "<module>"]


def key(module: Module, site: TransposeSite) -> dict:
    """What identifies ``site`` across recompiles, edits elsewhere and drivers: its module's name,
    rule and shapes, and the parameter where the module names it by path, else the functions of
    the model's own frames (:func:`model_frames`), innermost first (a frame's line only where it
    names no function)."""
    named = None if site.by_position else site.parameter  # a position shifts: not a key
    rule = rule_of(site)
    frames = model_frames(module.name, site.user_stack)
    return {
        "module": module.name,
        "rule": rule.code if rule else None,
        "parameter": named,
        "functions": None if named else [f.function or readable(f) for f in frames],
        "dot": site.dot_shape,
        "transpose": site.shape,
    }


def tag(entry: dict) -> str:
    """A key as one string, to count and compare."""
    return json.dumps(entry, sort_keys=True)


def describe(entry: dict) -> str:
    """A baseline entry in words: ``jit_train_step FB001 params['w'] dot f32[8,2] -> f32[2,8]``."""
    named = entry.get("parameter") or " < ".join(entry.get("functions") or ()) or "?"
    shapes = f"dot {entry.get('dot')} -> transpose {entry.get('transpose')}"  # pragma: no mutate
    return f"{entry.get('module')} {entry.get('rule')} {named}: {shapes}"  # pragma: no mutate


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
    except PermissionError:
        raise ValueError(f"{path}: permission denied") from None
    found = data.get("format") if isinstance(data, dict) else None
    if found != FORMAT:
        stale = str(found).startswith("find-barriers")  # an older format of this tool's
        older = f" (it is {found}: write it again)" if stale else ""  # pragma: no mutate
        raise ValueError(f"{path}: not a {FORMAT} baseline{older}; use --write-baseline {path}")
    entries = data.get("sites", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ValueError(
            f"{path}: its sites are not a list of entries; use --write-baseline {path}"
        )
    return Counter(tag(entry) for entry in entries)
