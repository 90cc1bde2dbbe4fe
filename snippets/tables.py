"""Markdown tables from lists of records, for the guides' executed output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from snippets.cli import run_module


def markdown_table(
    rows: Sequence[Mapping[str, object]], headers: Mapping[str, str] | None = None
) -> str:
    """A Markdown table of ``rows``; ``headers`` maps keys to column titles (default: all keys).

    >>> print(markdown_table([{"n": 2, "ok": True}], {"n": "ranks", "ok": "exact"}))
    | ranks | exact |
    | --- | --- |
    | 2 | True |
    """
    headers = headers or {key: key for key in rows[0]}
    lines = ["| " + " | ".join(headers.values()) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(str(row[key]) for key in headers) + " |" for row in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    run_module()
