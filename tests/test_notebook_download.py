"""A guide's page offers its executed notebook, outputs included, in the download menu."""

from __future__ import annotations

import nbformat

import notebook_download
from tests.sphinx_project import GUIDE, build_project


def test_a_guides_page_links_its_executed_notebook(tmp_path):
    (tmp_path / "src" / "guides").mkdir(parents=True)
    (tmp_path / "src" / "guides" / "demo.md").write_text(GUIDE)
    settings = 'root_doc = "guides/demo"\nhtml_theme = "sphinx_book_theme"\n'
    settings += f'nb_execution_mode = "cache"\nnb_execution_cache_path = "{tmp_path / "cache"}"\n'
    html = tmp_path / "out" / "html"
    build = build_project(tmp_path / "src", html, ["myst_nb", notebook_download], settings, "-q")
    assert build.returncode == 0, build.stderr
    notebook = nbformat.read(html / "_sources" / "guides" / "demo.ipynb", as_version=4)
    assert notebook.cells[-1].outputs[0]["data"]["text/plain"] == "2"
    page = (html / "guides" / "demo.html").read_text()
    assert 'href="../_sources/guides/demo.ipynb"' in page
