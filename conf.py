"""Sphinx configuration. The source directory is the repository root."""

import ast
import importlib.metadata
import math
import os
import tomllib
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
from docutils import nodes
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution
from myst_nb.core.execute.base import ExecutionError
from myst_nb.core.read import create_nb_reader
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

from snippets.support.inputs import Inputs, versions_digest

LOGGER = logging.getLogger(__name__)

project = "JAX sharding performance, executed"
author = "The shard-perf-docs authors"
copyright = "2026, the shard-perf-docs authors"

extensions = [
    "myst_nb",
    "notfound.extension",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Google-style Args: sections, as Flax and MaxText write them
    "sphinx.ext.viewcode",
    "sphinx_copybutton",
    "sphinx_design",
]

root_doc = "docs/index"
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = [
    "README.md",
    "_build",
    ".*",  # .nox, .venv, .git, .ci, .pytest_cache and other hidden tool folders
    "**/.*",
    "venv",
    "node_modules",  # package.json's lint tools
    "*.egg-info",
    "tests",
    "snippets",
    "find-barriers",  # its README is the distribution's, not a page
    "guides/*.ipynb",  # each guide's notebook for Colab, written from the guide (the page)
]

# Guides execute at build time, before Sphinx reads them (_execute_outdated_guides): each is
# cached with the inputs it read, so a guide runs again only when one of them changed, and a
# failing cell fails the build with the guide's name.
nb_execution_mode = "cache"
nb_execution_cache_path = "_build/.jupyter_cache"
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 600
nb_merge_streams = True
nb_render_markdown_format = "myst"  # Markdown outputs (tables) are parsed as MyST
myst_heading_anchors = 3
myst_url_schemes = ["http", "https", "mailto", "ftp", "jax-source"]  # jax-source: see below

napoleon_numpy_docstring = False  # Google style only
nitpicky = True  # a cross-reference to nothing is a warning, so the -W build fails on it
nitpick_ignore_regex = [
    # Types from other projects: no intersphinx, the build stays offline.
    ("py:class", r"(collections|typing|pathlib|argparse|subprocess|jax|jaxlib|flax)\..*"),
    ("py:class", r"(numpy|optax|matplotlib|orbax|pydantic)\..*"),
    # What autodoc prints of snippets.support.config.PositiveInt's Annotated[int, Field(...)] metadata.
    ("py:class", r"\w+=.*|Strict|Ge|FieldInfo"),
    # A generic function's type parameter (def interleaved[K: Hashable]): no class to link to.
    ("py:class", r"[A-Z]"),
]
viewcode_follow_imported_members = False  # an imported name's page would link under the importer
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_class_signature = "separated"  # nnx.Module's metaclass hides __init__'s parameters
autodoc_preserve_defaults = True  # defaults as written (jnp.float32), not their repr
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "sphinx_book_theme"
html_title = "JAX sharding performance, executed"
html_theme_options = {
    "show_toc_level": 2,
    "home_page_in_toc": True,
    "use_download_button": True,
    # One search per screen: the sidebar's field on a wide screen, the article header's button on
    # a narrow one. Unset, pydata-sphinx-theme 0.20 adds a top bar with a second search field.
    "navbar_persistent": [],
}
html_context = {"default_mode": "auto"}  # the theme logs an error for an unset mode
html_static_path = ["docs/_static"]
html_css_files = ["custom.css"]
html_js_files = [("search_excerpts.js", {"defer": "defer"})]
html_favicon = "docs/_static/favicon.svg"


def repository_options(url: str) -> dict[str, object]:
    """Theme options for the repository button and the source, edit and issue links of ``url``,
    and, for a GitHub repository, each guide's "Colab" launch button (it opens the guide's
    notebook beside it, ``guides/NAME.ipynb``).

    With no address there are no such links, and no placeholder stands in for one.
    """
    if not url:
        return {}
    colab = {"colab_url": "https://colab.research.google.com"}  # it opens GitHub's notebooks only
    return {
        "repository_url": url,
        "repository_branch": "main",
        "path_to_docs": "",
        "use_repository_button": True,
        "use_source_button": True,
        "use_edit_page_button": True,
        "use_issues_button": True,
    } | ({"launch_buttons": colab} if urlparse(url).hostname == "github.com" else {})


_PYPROJECT = tomllib.loads((Path(__file__).parent / "pyproject.toml").read_text())
REPOSITORY_URL = _PYPROJECT["project"].get("urls", {}).get("Repository", "").rstrip("/")
"""The repository's address: ``Repository`` in pyproject.toml's ``[project.urls]``, the one place
it is set. Pages show it through the ``repository`` tag and role (see :func:`setup`)."""
html_theme_options |= repository_options(REPOSITORY_URL)
repository_address = REPOSITORY_URL  # a config value (see setup): changing it re-reads every page


def repository_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """``{repository}`/``` shows the repository's address as a link; it needs one to be set.

    Pages use it inside ``{only} repository``, which Sphinx drops when no address is set.
    """
    if not REPOSITORY_URL:
        return [nodes.literal(rawtext, text)], []
    if text != "/":
        message = inliner.reporter.error(
            f"{{repository}} takes only '/' (the repository's address), not {text!r}", line=lineno
        )
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    address = nodes.literal(REPOSITORY_URL, REPOSITORY_URL)  # shown whole, not shortened
    return [nodes.reference(rawtext, "", address, refuri=REPOSITORY_URL)], []


JAX_RELEASE = importlib.metadata.version("jax")
"""The installed JAX release, whose source the ``jax-source:`` links point at."""
jax_release = JAX_RELEASE  # a config value (see setup): a new release re-reads every page


def jax_source_lines(name: str, text: str = "") -> tuple[str, int, int]:
    """Where ``name`` is in the installed JAX: its file as JAX's repository names it, and the
    first and last lines.

    ``name`` is a qualified name (``jax._src.pjit.assert_shardings_equal``): its definition. With
    ``text``, which must occur once in ``name``'s source: the statement holding the text, or the
    header of the ``def`` or ``class`` that does. ``LookupError`` if either is absent.
    """
    path, node, rest = _jax_module(name)
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
    return Path(importlib.metadata.distribution("jax").locate_file(path))


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
    around = [
        s for s in ast.walk(node) if isinstance(s, ast.stmt) and s.lineno <= line <= s.end_lineno
    ]
    if not around:
        return line, line
    inner = min(around, key=lambda s: s.end_lineno - s.lineno)
    definition = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    if isinstance(inner, definition) and line < inner.body[0].lineno:
        return inner.lineno, inner.body[0].lineno - 1
    return inner.lineno, inner.end_lineno


def jax_source_url(name: str, text: str = "") -> str:
    """The address of those lines (see :func:`jax_source_lines`) at the installed release's tag."""
    path, first, last = jax_source_lines(name, text)
    lines = f"L{first}" if first == last else f"L{first}-L{last}"
    return f"https://github.com/jax-ml/jax/blob/jax-v{JAX_RELEASE}/{path}#{lines}"


def _link_jax_source(app, doctree):
    """A link to ``jax-source:NAME`` (``[label]: jax-source:NAME "TEXT"``: the title is the text
    to find) goes to those lines of the installed JAX on GitHub; a NAME or TEXT that JAX lacks is
    a warning, which fails the ``-W`` build."""
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


# Where the site is published: GitHub Pages (the docs workflow sets SITE_BASE_URL) or Read the
# Docs (it sets READTHEDOCS_CANONICAL_URL). With an address, pages get a canonical link and the
# site a sitemap.xml; a local build has neither. The 404 page's links are absolute, so they
# start with the address's path ("/" when there is none).
_base_url = os.environ.get("SITE_BASE_URL") or os.environ.get("READTHEDOCS_CANONICAL_URL", "")
if _base_url:
    html_baseurl = _base_url.rstrip("/") + "/"
    extensions.append("sphinx_sitemap")
    sitemap_url_scheme = "{link}"  # html_baseurl already holds any language and version
    sitemap_excludes = ["404.html", "genindex.html", "py-modindex.html", "search.html"]
    sitemap_excludes += ["_modules/*"]  # viewcode's highlighted sources
notfound_urls_prefix = urlparse(_base_url).path.rstrip("/") + "/"

# No network at build time: no intersphinx, no remote images.

ROOT_REDIRECT = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="0; url=docs/index.html">
<link rel="canonical" href="docs/index.html">
<link rel="icon" href="_static/favicon.svg">
<title>{title}</title></head>
<body><p><a href="docs/index.html">{title}</a></p></body></html>
"""


def _write_root_redirect(app, exception):
    """Make ``_build/html/index.html`` open the landing page, which lives in ``docs/``."""
    if exception is None and app.builder.format == "html":
        (app.outdir / "index.html").write_text(ROOT_REDIRECT.format(title=html_title))


def _guide_notebook(app, docname: str) -> nbformat.NotebookNode | None:
    """The notebook myst-nb reads from ``docname`` (so jupyter-cache's hash matches), or ``None``
    for a page without code cells."""
    path = Path(app.env.doc2path(docname))
    text = path.read_text()
    reader = create_nb_reader(str(path), app.env.myst_config, app.env.mystnb_config, text)
    notebook = reader.read(text) if reader is not None else None
    if notebook is None or not any(cell.cell_type == "code" for cell in notebook.cells):
        return None
    return notebook


def _guide_inputs(app, docname: str, notebook: nbformat.NotebookNode) -> dict[str, str]:
    """What a guide's cells read (:class:`snippets.support.inputs.Inputs`), each with its hash."""
    code = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    folder = Path(app.env.doc2path(docname)).parent
    return Inputs(Path(app.srcdir)).add_code(code, folder).versions()


def _changed(inputs: dict[str, str], before: dict[str, str]) -> str:
    """Which inputs differ, for the log: a guide's reason to run again."""
    names = sorted(
        name for name in inputs.keys() | before.keys() if inputs.get(name) != before.get(name)
    )
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


_EXECUTIONS: dict[str, tuple[Future, dict[str, str]]] = {}
"""The guides executing in this build, by docname: the execution and the inputs it is keyed on."""
_READ_FROM: dict[str, str] = {}
"""Per guide, a digest of the inputs of the execution this build renders it from."""


def _execute_outdated_guides(app, env, added, changed, removed):
    """Start executing each guide whose cached execution is missing or was keyed on other inputs
    (the modules its cells import, transitively, the files they name, the packages), one at a time
    per core, longest first; Sphinx re-reads those guides. A guide whose inputs are unchanged does
    not run: editing a module it does not import leaves its cached execution in place."""
    config = env.mystnb_config
    if config.execution_mode != "cache":
        return []
    cache = get_cache(config.execution_cache_path)
    outdated, rendered = {}, getattr(env, "rendered_from", {})
    _READ_FROM.clear()
    for docname in sorted(env.found_docs - removed):
        if (notebook := _guide_notebook(app, docname)) is None:
            continue
        inputs = _guide_inputs(app, docname, notebook)
        _READ_FROM[docname] = versions_digest(inputs)
        try:
            before = cache.match_cache_notebook(notebook).data.get("inputs", {})
        except KeyError:
            before = {}
        if before != inputs:
            reason = f"changed: {_changed(inputs, before)}" if before else "not in the cache"
            outdated[docname] = (notebook, inputs, reason)
    seconds = {r.uri: r.data.get("execution_seconds", 0) for r in cache.list_cache_records()}

    def longest_first(docname: str) -> tuple[float, int]:  # the last time, else the code's size
        code = [cell.source for cell in outdated[docname][0].cells if cell.cell_type == "code"]
        return seconds.get(str(env.doc2path(docname)), math.inf), len("".join(code))

    workers = max(1, min(len(outdated), len(os.sched_getaffinity(0))))
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="execute")
    for docname in sorted(outdated, key=longest_first, reverse=True):
        notebook, inputs, reason = outdated[docname]
        LOGGER.info(f"Executing notebook ({reason})", location=docname)
        run = partial(single_nb_execution, notebook, cwd=str(Path(env.doc2path(docname)).parent))
        execution = pool.submit(
            run, timeout=config.execution_timeout, allow_errors=config.execution_allow_errors
        )
        _EXECUTIONS[docname] = (execution, inputs)
    pool.shutdown(wait=False)
    stale = {docname for docname, read in _READ_FROM.items() if rendered.get(docname) != read}
    return sorted((set(outdated) | stale) - added - changed)


def _cache_execution(app, docname, source=None):
    """Before myst-nb reads a guide, wait for its execution and cache it with its inputs, for
    myst-nb to render; a cell that failed fails the build and names the guide, as when myst-nb
    executes. Meanwhile Sphinx reads the pages without code."""
    if docname not in _EXECUTIONS:
        return
    execution, inputs = _EXECUTIONS.pop(docname)
    path = app.env.doc2path(docname)
    try:
        result = execution.result()
        error, trace = result.err, result.exc_string
    except Exception as failure:  # noqa: BLE001 (a kernel that died: every error names the guide)
        error, trace = failure, traceback.format_exc()
    if error is not None:
        for other, _ in _EXECUTIONS.values():
            other.cancel()
        LOGGER.warning(
            f"Executing notebook failed: {type(error).__name__}\n{trace}",
            location=docname,
            type="mystnb",
            subtype="exec",
        )
        raise ExecutionError(str(path))
    LOGGER.info(f"Executed notebook in {result.time:.2f} seconds", location=docname)
    get_cache(app.env.mystnb_config.execution_cache_path).cache_notebook_bundle(
        CacheBundleIn(
            result.nb, str(path), data={"execution_seconds": result.time, "inputs": inputs}
        ),
        check_validity=False,
        overwrite=True,
    )


def _cache_executions_before_parallel_read(app, env, docnames):
    """With ``-j``, Sphinx reads in forked processes, which cannot wait for this one's threads."""
    if app.parallel > 1:
        for docname in list(_EXECUTIONS):
            _cache_execution(app, docname)


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
    """Right after a guide is read (and executed or served from the cache), keep its notebook,
    and which inputs that execution read: a later build reads the page again when they differ
    from its cached execution's (another cache, as ``nox -s reuse`` brings)."""
    docname = app.env.docname
    if docname in _READ_FROM:
        app.env.rendered_from = getattr(app.env, "rendered_from", {})
        app.env.rendered_from[docname] = _READ_FROM[docname]
    if docname.startswith("guides/") and (notebook := _executed_notebook(app, docname)):
        if not hasattr(app.env, "executed_notebooks"):
            app.env.executed_notebooks = {}
        app.env.executed_notebooks[docname] = notebook


_KEPT = ("executed_notebooks", "rendered_from")
"""What the environment keeps per guide (:func:`_keep_executed_notebook`)."""


def _forget_executed_notebook(app, env, docname):
    for kept in _KEPT:
        getattr(env, kept, {}).pop(docname, None)


def _merge_executed_notebooks(app, env, docnames, other):
    for name in _KEPT:
        kept = getattr(other, name, {})
        setattr(env, name, getattr(env, name, {}) | {d: kept[d] for d in docnames if d in kept})


def _link_executed_notebook(app, pagename, templatename, context, doctree):
    """Offer a guide's executed notebook in the page's download menu, beside the ``.md`` source.

    The notebook is written to ``_sources/`` and the book theme's download menu links it as
    ``.ipynb``; a guide without an executed notebook gets no link (the browser test fails).
    """
    notebook = getattr(app.env, "executed_notebooks", {}).get(pagename)
    if app.builder.format != "html" or notebook is None:
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(notebook, encoding="utf-8")
    context["ipynb_source"] = f"{pagename}.ipynb"


_PLAIN_DOCSTRINGS: dict[str, list[str]] = {}
"""Attribute and data docstrings, as written: napoleon would read a first line with a colon in
it ("The head variants, as LM-head options: ...") as ``type: description``."""


def _keep_plain_docstring(app, what, name, obj, options, lines):
    if what in ("attribute", "data", "property"):
        _PLAIN_DOCSTRINGS[name] = list(lines)


def _restore_plain_docstring(app, what, name, obj, options, lines):
    if what in ("attribute", "data", "property"):
        lines[:] = _PLAIN_DOCSTRINGS.pop(name, lines)


def setup(app):
    app.connect("autodoc-process-docstring", _keep_plain_docstring, priority=400)  # napoleon: 500
    app.connect("autodoc-process-docstring", _restore_plain_docstring, priority=600)
    app.add_config_value("repository_address", "", "env")
    if REPOSITORY_URL:
        app.tags.add("repository")
    app.add_role("repository", repository_role)
    app.add_config_value("jax_release", "", "env")
    app.connect("doctree-read", _link_jax_source)
    app.connect("doctree-read", _keep_executed_notebook)
    app.connect("env-purge-doc", _forget_executed_notebook)
    app.connect("env-merge-info", _merge_executed_notebooks)
    app.connect("html-page-context", _link_executed_notebook, priority=500)
    app.connect("build-finished", _write_root_redirect)
    app.connect("env-get-outdated", _execute_outdated_guides)
    app.connect("env-before-read-docs", _cache_executions_before_parallel_read)
    app.connect("source-read", _cache_execution)
    app.connect("viewcode-find-source", _snippet_source)


def _snippet_source(app, modname: str):
    """viewcode reads a snippet module's source from its file instead of importing it (JAX)."""
    path = Path(__file__).parent / (modname.replace(".", "/") + ".py")
    if not modname.startswith("snippets.") or not path.is_file():
        return None
    analyzer = ModuleAnalyzer.for_file(path, modname)
    analyzer.find_tags()
    return analyzer.code, analyzer.tags
