"""viewcode reads a ``snippets`` module's source from its file under the source directory instead
of importing it, which would import JAX on every build."""

from pathlib import Path

from sphinx.pycode import ModuleAnalyzer


def _snippet_source(app, modname: str):
    path = Path(app.srcdir) / (modname.replace(".", "/") + ".py")
    if not modname.startswith("snippets.") or not path.is_file():
        return None
    analyzer = ModuleAnalyzer.for_file(path, modname)
    analyzer.find_tags()
    return analyzer.code, analyzer.tags


def setup(app):
    app.setup_extension("sphinx.ext.viewcode")
    app.connect("viewcode-find-source", _snippet_source)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
