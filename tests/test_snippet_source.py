"""viewcode reads a ``snippets`` module's source from its file, and leaves other modules alone."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from snippet_source import _snippet_source

ROOT = Path(__file__).resolve().parent.parent
SITE = SimpleNamespace(srcdir=ROOT)


def test_a_snippet_modules_source_and_definitions_come_from_its_file():
    code, tags = _snippet_source(SITE, "snippets.cache.inputs")
    assert code == (ROOT / "snippets" / "cache" / "inputs.py").read_text()
    kind, first, last = tags["Inputs"]
    lines = code.splitlines()
    assert (kind, lines[first - 1]) == ("class", "class Inputs:")
    assert lines[last - 1].startswith("    ")  # the last line of its body
    assert tags["Inputs.add_code"][0] == "def"


def test_other_modules_are_left_to_viewcode():
    assert _snippet_source(SITE, "jax.numpy") is None
    assert _snippet_source(SITE, "snippets.no_such_module") is None
