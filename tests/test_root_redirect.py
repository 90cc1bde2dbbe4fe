"""The top of the HTML output opens the root document, which lives in a folder."""

from __future__ import annotations

import root_redirect
from tests.sphinx_project import build_project


def test_the_top_index_opens_the_root_document_with_the_sites_title_and_icon(tmp_path):
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "index.rst").write_text("Home\n====\n")
    (tmp_path / "icon.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>\n')
    settings = 'root_doc = "pages/index"\nhtml_title = "A site"\nhtml_favicon = "icon.svg"\n'
    build = build_project(tmp_path, tmp_path / "html", [root_redirect], settings, "-q")
    assert build.returncode == 0, build.stderr
    top = (tmp_path / "html" / "index.html").read_text()
    assert '<meta http-equiv="refresh" content="0; url=pages/index.html">' in top
    assert '<link rel="canonical" href="pages/index.html">' in top
    assert '<link rel="icon" href="_static/icon.svg">' in top
    assert '<title>A site</title></head>\n<body><p><a href="pages/index.html">A site</a>' in top
    assert (tmp_path / "html" / "pages" / "index.html").is_file()
    assert (tmp_path / "html" / "_static" / "icon.svg").is_file()
