"""``--format github``: GitHub Actions workflow commands, annotations at the user's lines."""

from __future__ import annotations

from find_barriers._baseline import describe
from find_barriers._check import Result
from find_barriers._formats.options import Options
from find_barriers._formats.wording import message, place
from find_barriers._rules import STALE_ENTRY, rule_of
from find_barriers._vocabulary import Status


def _escape(value: str, properties: bool = False) -> str:
    """A workflow command's data (with ``properties``, a property) escaped as GitHub reads it."""
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return value.replace(":", "%3A").replace(",", "%2C") if properties else value


def emit(result: Result, options: Options) -> str:
    """One ``::error`` workflow command per finding (``::notice`` below the cost threshold), at
    the user's line, titled by its rule; a ``::warning`` (``::error`` if ``strict``) per stale
    baseline entry, at the baseline file."""
    lines = []
    for item in result.modules:
        for finding in item.findings:
            site, status = finding.site, finding.status
            if status not in (Status.NEW, Status.BELOW) or (rule := rule_of(site)) is None:
                continue
            file, line = place(item.module.path, site)
            where = f"file={_escape(file, True)}" + (f",line={line}" if line else "")
            title = _escape(f"find-barriers {rule.code} ({rule.name}): {item.module.name}", True)
            level = "error" if status is Status.NEW else "notice"
            lines.append(f"::{level} {where},title={title}::{_escape(message(site))}")
    level = "error" if options.strict else "warning"
    title = _escape(f"find-barriers {STALE_ENTRY.code} ({STALE_ENTRY.name})", True)
    for entry in result.stale:
        text = _escape(f"{STALE_ENTRY.summary}: {describe(entry)}. Fix: {STALE_ENTRY.fix}")
        lines.append(f"::{level} file={_escape(result.baseline or '', True)},title={title}::{text}")
    return "\n".join(lines)
