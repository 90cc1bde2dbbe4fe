"""Accepted sites: ``--write-baseline FILE`` records today's blocked sites, ``--baseline FILE``
accepts them, so only new ones fail. A site is keyed by what survives a recompile: its module's
name, the parameter (where the module names it by path, not by a flattened index), the shapes,
and the user's line (relative to the working directory: run the check from the same place, the
repository's root in CI); never by instruction names or numbers.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from snippets.hlo.dumps import Module
from snippets.hlo.provenance import readable
from snippets.hlo.sites import TransposeSite

FORMAT = "find-barriers-baseline/1"
_FLAT_INDEX = re.compile(r"^[\w.]*(\[\d+\])+$")
"""A name that is only a position in a flattened state (``model.states[0][32]``): it shifts when a
layer is added, so it is left out of the key."""


def key(module: Module, site: TransposeSite) -> dict:
    """What identifies ``site`` across recompiles and edits elsewhere in the model."""
    parameter = site.parameter if site.parameter and not _FLAT_INDEX.match(site.parameter) else None
    return {
        "module": module.name,
        "parameter": parameter,
        "role": site.role,
        "dot": site.dot_shape,
        "transpose": site.shape,
        "line": readable(site.user_source),
    }


def _tag(entry: dict) -> str:
    return json.dumps(entry, sort_keys=True)


def write(path: str, found: dict[Module, list[TransposeSite]]) -> None:
    """Record every blocked site of the modules checked (each counted, so two alike are two)."""
    entries = [
        key(module, site)
        for module, sites in found.items()
        if not module.same_as
        for site in sites
        if site.blocked
    ]
    try:
        Path(path).write_text(json.dumps({"format": FORMAT, "sites": entries}, indent=2) + "\n")
    except OSError as error:
        raise ValueError(f"{path}: cannot write the baseline there ({error.strerror})") from None


def load(path: str) -> Counter:
    """The accepted sites of a baseline file; a ValueError names what is wrong with it."""
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{path}: no such baseline file; write one with --write-baseline {path}")
    try:
        data = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not a baseline (not JSON: {error})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a {FORMAT} baseline; write one with --write-baseline")
    return Counter(_tag(entry) for entry in data.get("sites", []))


def new_sites(
    found: dict[Module, list[TransposeSite]], accepted: Counter | None = None
) -> dict[int, bool]:
    """For each site (by ``id``), whether it is new: a blocked site beyond the count of its key
    the baseline accepts (none without one). Everything else is not new."""
    left = Counter(accepted)
    new = {}
    for module, sites in found.items():
        for site in sites:
            tag = _tag(key(module, site))
            new[id(site)] = site.blocked and not module.same_as and left[tag] <= 0
            left[tag] -= site.blocked
    return new
