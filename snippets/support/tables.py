"""Markdown tables from lists of records, for the guides' output and the command lines' reports."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import numpy as np


def markdown_table(rows: Sequence[Mapping], headers: Mapping[str, str] | None = None) -> str:
    """A Markdown table of ``rows``; ``headers`` maps keys to column titles (default: all keys).

    >>> print(markdown_table([{"n": 2, "ok": True}], {"n": "ranks", "ok": "exact"}))
    | ranks | exact |
    | --- | --- |
    | 2 | True |
    """
    headers = headers or {key: key for key in rows[0]}
    lines = ["| " + " | ".join(headers.values()) + " |", "|" + " --- |" * len(headers)]
    lines += ["| " + " | ".join(_text(row[key]) for key in headers) + " |" for row in rows]
    return "\n".join(lines)


def _text(value: object) -> str:
    """A float positionally, to four decimals (four digits below 1); anything else as ``str``."""
    if not isinstance(value, float):
        return str(value)
    return np.format_float_positional(value, precision=4, fractional=abs(value) >= 1, trim="-")


def print_report(report: Mapping[str, object], as_json: bool = False, indent: str = "") -> None:
    """Print a command line's report: JSON, or a line per key, nested, with records as tables.

    >>> print_report({"ranks": 2, "runs": [{"mode": "auto", "calls": 0}]})
    ranks: 2
    runs:
    | mode | calls |
    | --- | --- |
    | auto | 0 |
    """
    if as_json:
        print(json.dumps(report, indent=2))
        return
    for key, value in report.items():
        if isinstance(value, Mapping):
            print(f"{indent}{key}:")
            print_report(value, indent=indent + "  ")
        elif isinstance(value, list) and value and all(isinstance(row, Mapping) for row in value):
            table = markdown_table(value).replace("\n", "\n" + indent)
            print(f"{indent}{key}:\n{indent}{table}")
        else:
            text = json.dumps(value) if isinstance(value, list) else _text(value)
            print(f"{indent}{key}: {text}")
