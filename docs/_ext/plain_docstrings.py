"""Attribute and data docstrings as written: napoleon would read a first line with a colon in it
("The head variants, as LM-head options: ...") as ``type: description``."""

_WRITTEN: dict[str, list[str]] = {}
"""Each attribute's docstring lines before napoleon's turn, by qualified name."""


def _keep_plain_docstring(app, what, name, obj, options, lines):
    if what in ("attribute", "data", "property"):
        _WRITTEN[name] = list(lines)


def _restore_plain_docstring(app, what, name, obj, options, lines):
    if what in ("attribute", "data", "property"):
        lines[:] = _WRITTEN.pop(name, lines)


def setup(app):
    app.setup_extension("sphinx.ext.napoleon")
    app.connect("autodoc-process-docstring", _keep_plain_docstring, priority=400)  # napoleon: 500
    app.connect("autodoc-process-docstring", _restore_plain_docstring, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
