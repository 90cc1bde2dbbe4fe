"""``--format json``: every module and its sites, and the stale baseline entries, as one document
of :data:`SCHEMA`, described by ``find_barriers.schema.json`` in the package."""

from __future__ import annotations

import dataclasses
import json

from find_barriers import __version__
from find_barriers._check import Finding, Result
from find_barriers._formats.options import Options
from find_barriers._formats.wording import fix
from find_barriers._frames import readable
from find_barriers._rules import rule_of
from find_barriers._vocabulary import Status, Verdict

SCHEMA = "find-barriers/5"
"""The JSON output's ``schema``: its name and version, raised when a field changes meaning."""


def record(finding: Finding) -> dict:
    """A site as JSON data: its fields, verdict, rule, lines, estimated cost, fix and status."""
    site = finding.site
    rule = rule_of(site)
    frames = [
        {"file": (readable(f) or "").rpartition(":")[0], "line": f.line, "function": f.function}
        for f in site.user_stack
    ]
    return dataclasses.asdict(site) | {
        "verdict": site.verdict,
        "rule": rule and rule.code,
        "help_url": rule and rule.url,
        "status": finding.status,
        "stack": [readable(frame) for frame in site.stack],
        "user_stack": frames,
        "user_line": readable(site.user_line or site.source),
        "via": readable(site.via),
        "placed_at": readable(site.placed_at),
        "by_position": site.by_position,
        "cost": site.cost and (dataclasses.asdict(site.cost) | {"basis": site.cost.links}),
        "fix": fix(site),
    }


def emit(result: Result, options: Options) -> str:
    """Every module and its sites, and the stale baseline entries, as one JSON document of
    :data:`SCHEMA`, with the run's exit status."""
    modules = [
        {
            "file": item.module.path,
            "module": item.module.name,
            "same_as": item.module.same_as,
            "counts": {str(v): n for v, n in item.counts.items()},
            "estimated_cost": item.estimated_cost,
            "sites": [record(finding) for finding in item.findings],
        }
        for item in result.modules
    ]
    counted = result.counted
    totals = {str(v): sum(item.counts[v] for item in counted) for v in Verdict} | {
        "new_blocked": sum(len(item.new) for item in counted),
        "below": sum(f.status is Status.BELOW for item in counted for f in item.findings),
        "stale": len(result.stale),
        "estimated_cost": sum(item.estimated_cost for item in counted),
    }
    document = {"schema": SCHEMA, "version": __version__, "exit_status": options.exit_status}
    stale = {"baseline": result.baseline, "stale": result.stale}
    return json.dumps(document | {"modules": modules, "total": totals} | stale, indent=2)
