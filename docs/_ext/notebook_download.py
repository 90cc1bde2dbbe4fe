"""A guide's executed notebook, outputs included, in its page's download menu beside the ``.md``
source (the book theme links ``ipynb_source``)."""

from pathlib import Path

import nbformat
from jupyter_cache import get_cache


def _executed_notebook(app, docname: str) -> str | None:
    """The executed notebook a guide page is rendered from, outputs included, as JSON text.

    myst-nb writes the page's notebook to ``jupyter_execute/`` beside the output directory
    while it reads the page, but with the inputs only when its execution cache served the
    page, and that folder is shared by every build with the same parent directory. So the
    outputs come from this build's execution cache, the entry the page was rendered from.
    """
    path = Path(app.outdir).parent / "jupyter_execute" / f"{docname}.ipynb"
    if not path.is_file():
        return None
    notebook = nbformat.read(path, as_version=4)
    try:
        _, notebook = get_cache(
            app.env.mystnb_config.execution_cache_path
        ).merge_match_into_notebook(notebook)
    except KeyError:
        if not any(cell.get("outputs") for cell in notebook.cells):
            return None
    return nbformat.writes(notebook)


def _keep_executed_notebook(app, doctree):
    """Right after a guide is read (and executed or served from the cache), keep its notebook."""
    docname = app.env.docname
    if docname.startswith("guides/") and (notebook := _executed_notebook(app, docname)):
        app.env.executed_notebooks = getattr(app.env, "executed_notebooks", {})
        app.env.executed_notebooks[docname] = notebook


def _forget_executed_notebook(app, env, docname):
    getattr(env, "executed_notebooks", {}).pop(docname, None)


def _merge_executed_notebooks(app, env, docnames, other):
    kept = getattr(other, "executed_notebooks", {})
    kept = {d: kept[d] for d in docnames if d in kept}
    env.executed_notebooks = getattr(env, "executed_notebooks", {}) | kept


def _link_executed_notebook(app, pagename, templatename, context, doctree):
    """Write a guide's executed notebook to ``_sources/`` and offer it as the page's ``.ipynb``;
    a guide without an executed notebook gets no link (the browser test fails)."""
    notebook = getattr(app.env, "executed_notebooks", {}).get(pagename)
    if app.builder.format != "html" or notebook is None:
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(notebook, encoding="utf-8")
    context["ipynb_source"] = f"{pagename}.ipynb"


def setup(app):
    app.setup_extension("myst_nb")
    app.connect("doctree-read", _keep_executed_notebook)
    app.connect("env-purge-doc", _forget_executed_notebook)
    app.connect("env-merge-info", _merge_executed_notebooks)
    app.connect("html-page-context", _link_executed_notebook, priority=500)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
