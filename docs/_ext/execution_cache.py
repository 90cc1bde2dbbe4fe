"""Guides execute at build time, before Sphinx reads them: each is cached with the inputs it read
(:class:`snippets.cache.inputs.Inputs`), so a guide runs again only when one of them changed,
and a failing cell fails the build with the guide's name. Needs ``nb_execution_mode = "cache"``.
"""

import math
import os
import traceback
from concurrent.futures import Future, ThreadPoolExecutor
from functools import partial
from pathlib import Path

import nbformat
from jupyter_cache import get_cache
from jupyter_cache.base import CacheBundleIn
from jupyter_cache.executors.utils import single_nb_execution
from myst_nb.core.execute.base import ExecutionError
from myst_nb.core.read import create_nb_reader
from sphinx.util import logging

from snippets.cache.inputs import Inputs, versions_digest

LOGGER = logging.getLogger(__name__)


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
    """What a guide's cells read (:class:`snippets.cache.inputs.Inputs`), each with its hash."""
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
RENDERED_FROM = "rendered_from"
"""The metadata key of that digest, kept from the build that last read the guide."""


def _execute_outdated_guides(app, env, added, changed, removed):
    """Start executing each guide whose cached execution is missing or was keyed on other inputs
    (the modules its cells import, transitively, the files they name, the packages), one at a time
    per core, longest first; Sphinx re-reads those guides. A guide whose inputs are unchanged does
    not run: editing a module it does not import leaves its cached execution in place. A guide
    rendered from another execution's inputs (another cache, as ``nox -s reuse`` brings) is read
    again."""
    config = env.mystnb_config
    if config.execution_mode != "cache":
        return []
    cache = get_cache(config.execution_cache_path)
    outdated = {}
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
    rendered = {docname: env.metadata.get(docname, {}).get(RENDERED_FROM) for docname in _READ_FROM}
    stale = {docname for docname, read in _READ_FROM.items() if rendered[docname] != read}
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


def _keep_rendered_from(app, doctree):
    """Right after a guide is read, keep in its metadata which inputs the execution it was
    rendered from read (Sphinx forgets and merges a page's metadata with the page)."""
    if app.env.docname in _READ_FROM:
        app.env.metadata[app.env.docname][RENDERED_FROM] = _READ_FROM[app.env.docname]


def setup(app):
    app.setup_extension("myst_nb")
    app.connect("env-get-outdated", _execute_outdated_guides)
    app.connect("env-before-read-docs", _cache_executions_before_parallel_read)
    app.connect("source-read", _cache_execution)
    app.connect("doctree-read", _keep_rendered_from)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
