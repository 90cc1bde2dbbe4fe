"""The output formats, one module each, by their ``--format`` name: each emitter turns a run's
:class:`~find_barriers.Result` and the command line's :class:`Options` into text."""

from __future__ import annotations

from collections.abc import Callable

from find_barriers._check import Result
from find_barriers._formats import github, json, sarif, text
from find_barriers._formats.options import Options

Emitter = Callable[[Result, Options], str]
FORMATS: dict[str, Emitter] = {
    "text": text.emit,
    "json": json.emit,
    "github": github.emit,
    "sarif": sarif.emit,
}
"""Every output format, by name: what ``--format`` and ``action.yml``'s ``format`` input take."""

__all__ = ["FORMATS", "Emitter", "Options"]
