"""``find-barriers``'s output: each site with the user's line, its parameter and its fix, as text,
JSON (:data:`SCHEMA`, described by ``find_barriers.schema.json`` beside this file), GitHub
workflow-command annotations, or SARIF 2.1.0.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from snippets.hlo import fold
from snippets.hlo.baseline import key
from snippets.hlo.dumps import Module
from snippets.hlo.provenance import readable
from snippets.hlo.sites import TransposeSite

SCHEMA = "find-barriers/1"
"""The JSON output's ``schema``: its name and version, raised when a field changes meaning."""
VERDICTS = ("blocked", "foldable", "kept")
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
KERNEL_ORDER = (
    "write this weight gradient in kernel order: the layer's "
    "dot_general=auto_axes_dot_general (snippets.kernel_order_grad)"
)


def fix(site: TransposeSite) -> str | None:
    """What to do about a site: the fix for a blocked fold, or why a kept transpose needs none."""
    if site.verdict == "kept":
        return f"XLA keeps this transpose in either mode: {site.no_fold}"
    if site.verdict == "foldable":
        return None
    if site.placed_by == "constraint":
        return f"move it after the transpose (it is at {readable(site.placed_at)})"
    if site.role == "weight gradient":
        return KERNEL_ORDER
    return f"not a weight gradient ({site.role}): the guides' fixes are for weight gradients"


def site_lines(site: TransposeSite, new: bool = True) -> list[str]:
    """One site's :meth:`~snippets.hlo.sites.TransposeSite.line` (``accepted`` where the baseline
    has it), then what put the ``Sharding`` call there and the fix, or why XLA keeps it."""
    lines = [f"  {site.line(None if new or not site.blocked else 'accepted')}"]
    if site.blocked:
        placed: dict[str | None, str] = {
            "constraint": "your with_sharding_constraint",
            "explicit": "an explicit mesh's type",
        }
        lines.append(f"{'':12}Sharding call from {placed[site.placed_by]}; fix: {fix(site)}")
    elif site.verdict == "kept":
        lines.append(f"{'':12}{fix(site)}")
    return lines


def counts(sites: Sequence[TransposeSite]) -> dict[str, int]:
    """How many sites of each verdict."""
    return {verdict: sum(site.verdict == verdict for site in sites) for verdict in VERDICTS}


def _summary(sites: Sequence[TransposeSite]) -> str:
    """``3 transpose-of-dot sites: 1 blocked, 2 foldable, 0 kept``."""
    plural = "" if len(sites) == 1 else "s"
    by_verdict = ", ".join(f"{n} {verdict}" for verdict, n in counts(sites).items())
    return f"{len(sites)} transpose-of-dot site{plural}: {by_verdict}"


def text(found: dict[Module, list[TransposeSite]], new: dict, listed: set[Module]) -> str:
    """Per module in ``listed``, its summary and sites; a total line for more than one module."""
    lines = []
    for module, sites in found.items():
        if module.same_as:
            lines.append(f"{module.path}: the same module as {module.same_as}, not counted again")
        elif module in listed:
            lines.append(f"{module.path}: {_summary(sites)}")
            lines += [line for site in sites for line in site_lines(site, new[id(site)])]
    checked = [sites for module, sites in found.items() if not module.same_as]
    if len(found) > 1:
        every = [site for sites in checked for site in sites]
        lines.append(f"total: {len(checked)} modules, {_summary(every)}")
    return "\n".join(lines)


def record(site: TransposeSite, new: bool) -> dict:
    """A site as JSON data: its fields and verdict, the user's line, the fix, new or baselined."""
    return dataclasses.asdict(site) | {
        "verdict": site.verdict,
        "blocked": site.blocked,
        "source": readable(site.source),
        "user_line": readable(site.user_source),
        "placed_at": readable(site.placed_at),
        "stack": [readable(frame) for frame in site.stack],
        "fix": fix(site),
        "new": new,
    }


def as_json(found: dict[Module, list[TransposeSite]], new: dict, status: int) -> str:
    """Every module and its sites as one JSON document of :data:`SCHEMA`."""
    modules = [
        {
            "file": module.path,
            "module": module.name,
            "same_as": module.same_as,
            "counts": counts(sites),
            "sites": [record(site, new[id(site)]) for site in sites],
        }
        for module, sites in found.items()
    ]
    every = [site for module, sites in found.items() if not module.same_as for site in sites]
    total = counts(every) | {"new_blocked": sum(s.blocked and new[id(s)] for s in every)}
    document = {"schema": SCHEMA, "exit_status": status, "modules": modules, "total": total}
    return json.dumps(document, indent=2)


def _escape(value: str, properties: bool = False) -> str:
    """A workflow command's data (or, with ``properties``, a property) escaped as GitHub reads it."""
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if properties else value


def _message(site: TransposeSite) -> str:
    return f"blocked fold: {site.what}, {site.chain}. Fix: {fix(site)}"


def _place(module: Module, site: TransposeSite) -> tuple[str, int | None]:
    """The file and line to annotate: the user's line, else the module's file."""
    file, _, line = (readable(site.user_source) or "").rpartition(":")
    return (file, int(line)) if file and line.isdigit() else (module.path, None)


def github(found: dict[Module, list[TransposeSite]], new: dict) -> str:
    """One ``::error`` workflow command per new blocked site, at the user's line."""
    lines = []
    for module, sites in found.items():
        for site in sites:
            if not (site.blocked and new[id(site)]) or module.same_as:
                continue
            file, line = _place(module, site)
            place = f"file={_escape(file, True)}" + (f",line={line}" if line else "")
            title = _escape(f"find-barriers: {module.name}", True)
            lines.append(f"::error {place},title={title}::{_escape(_message(site))}")
    return "\n".join(lines)


def sarif(found: dict[Module, list[TransposeSite]], new: dict) -> str:
    """A SARIF 2.1.0 log: one result per blocked site (``error`` when new, ``note`` when in the
    baseline), located at the user's line, fingerprinted by its baseline key."""
    results = []
    for module, sites in found.items():
        for site in (s for s in sites if s.blocked and not module.same_as):
            file, line = _place(module, site)
            location: dict[str, object] = {"artifactLocation": {"uri": file}}
            location |= {"region": {"startLine": line}} if line else {}
            results.append(
                {
                    "ruleId": "blocked-fold",
                    "level": "error" if new[id(site)] else "note",
                    "message": {"text": _message(site)},
                    "locations": [{"physicalLocation": location}],
                    "partialFingerprints": {"findBarriers/v1": json.dumps(key(module, site))},
                }
            )
    rule = {
        "id": "blocked-fold",
        "name": "BlockedTransposeFold",
        "shortDescription": {"text": "A Sharding call blocks XLA's transpose(dot) fold"},
        "helpUri": fold.SOURCE,
    }
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {"tool": {"driver": {"name": "find-barriers", "rules": [rule]}}, "results": results}
        ],
    }
    return json.dumps(log, indent=2)
