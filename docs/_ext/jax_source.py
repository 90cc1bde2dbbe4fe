"""Links to JAX's source at the installed release: ``[label]: jax-source:NAME`` on a page links to
NAME's definition, and ``[label]: jax-source:NAME "TEXT"`` to the statement in NAME holding TEXT,
on GitHub at the installed release's tag. The site's ``myst_url_schemes`` must list ``jax-source``.
"""

import ast
import importlib.metadata
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from docutils import nodes
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
JAX_RELEASE = importlib.metadata.version("jax")
"""The installed JAX release, whose source the ``jax-source:`` links point at."""


def jax_source_lines(name: str, text: str = "") -> tuple[str, int, int]:
    """Where ``name`` is in the installed JAX: its file as JAX's repository names it, and the
    first and last lines.

    ``name`` is a qualified name (``jax._src.pjit.assert_shardings_equal``): its definition. With
    ``text``, which must occur once in ``name``'s source: the statement holding the text, or the
    header of the ``def`` or ``class`` that does. ``LookupError`` if either is absent.
    """
    path, module, rest = _jax_module(name)
    node: Any = module  # the module, then each definition inside it
    for part in rest:  # the last definition of each name, as Python binds it
        found = [n for n in getattr(node, "body", []) if getattr(n, "name", None) == part]
        if not found:
            raise LookupError(f"JAX {JAX_RELEASE} has no {name} ({path} defines no {part!r})")
        node = found[-1]
    if not text:
        decorators = [d.lineno for d in getattr(node, "decorator_list", [])]
        return path, min([node.lineno, *decorators]), node.end_lineno
    source = _jax_file(path).read_text().splitlines()
    lines = range(getattr(node, "lineno", 1), getattr(node, "end_lineno", len(source)) + 1)
    hits = [n for n in lines if text in source[n - 1]]
    if len(hits) != 1:
        raise LookupError(f"JAX {JAX_RELEASE}: {text!r} is in {name} {len(hits)} times, not once")
    return path, *_statement_lines(node, hits[0])


def _jax_file(path: str) -> Path:
    """The installed JAX's file at ``path`` (relative to site-packages, as in JAX's repository)."""
    return Path(str(importlib.metadata.distribution("jax").locate_file(path)))


def _jax_module(name: str) -> tuple[str, ast.Module, list[str]]:
    """The installed file of the longest module prefix of ``name``, parsed; and the rest."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        for path in ("/".join(parts[:end]) + ".py", "/".join(parts[:end]) + "/__init__.py"):
            if _jax_file(path).is_file():
                return path, ast.parse(_jax_file(path).read_text()), parts[end:]
    raise LookupError(f"JAX {JAX_RELEASE} has no module for {name}")


def _statement_lines(node: ast.AST, line: int) -> tuple[int, int]:
    """The innermost statement under ``node`` holding ``line``; a definition's header only."""
    spans = {
        s: (s.lineno, s.end_lineno or s.lineno) for s in ast.walk(node) if isinstance(s, ast.stmt)
    }
    around = [s for s, (first, last) in spans.items() if first <= line <= last]
    if not around:
        return line, line
    inner = min(around, key=lambda s: spans[s][1] - spans[s][0])
    definition = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if isinstance(inner, definition) and line < inner.body[0].lineno:
        return inner.lineno, inner.body[0].lineno - 1
    return spans[inner]


def jax_source_url(name: str, text: str = "") -> str:
    """The address of those lines (see :func:`jax_source_lines`) at the installed release's tag."""
    path, first, last = jax_source_lines(name, text)
    lines = f"L{first}" if first == last else f"L{first}-L{last}"
    return f"https://github.com/jax-ml/jax/blob/jax-v{JAX_RELEASE}/{path}#{lines}"


def _link_jax_source(app, doctree):
    """Point each ``jax-source:`` link at its lines (the link's title is the text to find); a
    NAME or TEXT that JAX lacks is a warning, which fails the ``-W`` build."""
    for reference in doctree.findall(nodes.reference):
        uri = reference.get("refuri", "")
        if not uri.startswith("jax-source:"):
            continue
        name, text = unquote(uri.removeprefix("jax-source:")), reference.get("reftitle", "")
        try:
            reference["refuri"] = jax_source_url(name, text)
        except LookupError as error:
            LOGGER.warning(f"{uri}: {error}", location=reference)
        reference["reftitle"] = f"JAX {JAX_RELEASE}: {name}"


def setup(app):
    app.add_config_value("jax_release", JAX_RELEASE, "env")  # a new release re-reads every page
    app.connect("doctree-read", _link_jax_source)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
