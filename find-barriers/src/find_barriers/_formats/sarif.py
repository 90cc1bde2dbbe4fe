"""``find-barriers --format sarif``: a SARIF 2.1.0 log, for code scanning. One result per blocked
site not ignored, at the user's line, and per stale baseline entry, at the baseline file, each with
its rule and a fingerprint of its own."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from find_barriers import __version__
from find_barriers._baseline import describe, key, tag
from find_barriers._check import PRICED, Result
from find_barriers._dumps import Module
from find_barriers._formats.options import Options
from find_barriers._formats.wording import message, place
from find_barriers._frames import readable
from find_barriers._rules import DOCS_URL, RULES, STALE_ENTRY, rule_of
from find_barriers._sites import TransposeSite
from find_barriers._vocabulary import Status

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
INFORMATION_URI = DOCS_URL + "guides/check_a_run.html"  # the page that introduces the check


def fingerprint(module: Module, site: TransposeSite, seen: Counter) -> str:
    """A site's identity for code scanning: its baseline key and the user's whole stack, lines
    included, so two layers through one helper differ; sites alike in all of that are numbered."""
    stack = [readable(frame) for frame in site.user_stack]
    identity = json.dumps([key(module, site), stack], sort_keys=True)
    seen[identity] += 1
    return hashlib.sha256(f"{identity}#{seen[identity]}".encode()).hexdigest()


def emit(result: Result, options: Options) -> str:
    """The log: the tool with its version and rules, then one result per blocked site (``error``
    when new; ``note`` below the cost threshold, or, suppressed, when the baseline accepts it),
    and one per stale baseline entry, at the baseline file (``warning``; ``error`` if
    ``strict``)."""
    results, seen = [], Counter[str]()
    for item in result.modules:
        for finding in item.findings:
            site, status, rule = finding.site, finding.status, rule_of(finding.site)
            if rule is None or status not in PRICED:
                continue
            file, line = place(item.module.path, site)
            location: dict[str, object] = {"artifactLocation": {"uri": file}}
            location |= {"region": {"startLine": line}} if line else {}
            found = {
                "ruleId": rule.code,
                "ruleIndex": list(RULES).index(rule.code),
                "level": "error"
                if status is Status.NEW
                else "note",  # accepted, or below the threshold
                "message": {"text": message(site)},
                "locations": [{"physicalLocation": location}],
                "partialFingerprints": {"findBarriers/v2": fingerprint(item.module, site, seen)},
            }
            if status is Status.ACCEPTED:
                found["suppressions"] = [{"kind": "external", "justification": "in the baseline"}]
            results.append(found)
    for entry in result.stale:
        seen[identity := tag(entry)] += 1
        digest = hashlib.sha256(f"{identity}#{seen[identity]}".encode()).hexdigest()
        results.append(
            {
                "ruleId": STALE_ENTRY.code,
                "ruleIndex": list(RULES).index(STALE_ENTRY.code),
                "level": "error" if options.strict else "warning",
                "message": {"text": f"{STALE_ENTRY.summary}: {describe(entry)}"},
                "locations": [
                    {"physicalLocation": {"artifactLocation": {"uri": result.baseline or ""}}}
                ],
                "partialFingerprints": {"findBarriers/v2": digest},
            }
        )
    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.summary},
            "help": {"text": f"Fix: {rule.fix}."},
            "helpUri": rule.url,
        }
        for rule in RULES.values()
    ]
    driver = {"name": "find-barriers", "version": __version__, "informationUri": INFORMATION_URI}
    run = {"tool": {"driver": driver | {"rules": rules}}, "results": results}
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2)
