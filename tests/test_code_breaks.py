"""Inline code gets a break opportunity after each inner underscore, and nothing else changes."""

from __future__ import annotations

import code_breaks
from code_breaks import break_at_underscores
from tests.sphinx_project import build_project


def test_an_inner_underscore_gets_a_break_and_tags_and_edges_do_not():
    html = (
        '<code class="xref py py-func docutils literal notranslate">'
        '<span class="pre">_private_name</span> <span class="pre">x__y_</span></code>'
    )
    assert break_at_underscores(html) == (
        '<code class="xref py py-func docutils literal notranslate">'
        '<span class="pre">_private_<wbr>name</span> <span class="pre">x__y_</span></code>'
    )


def test_only_inline_literals_change():
    block = '<pre><span class="n">lm_head</span></pre><p>snake_case prose</p>'
    assert break_at_underscores(block) == block


def test_a_built_page_breaks_inline_code_but_not_code_blocks(tmp_path):
    (tmp_path / "index.md").write_text(
        "# Flags\n\nSet `lm_head_vocab_parallel`.\n\n```python\nlm_head_vocab_parallel = True\n```\n"
    )
    build = build_project(tmp_path, tmp_path / "html", ["myst_parser", code_breaks], "", "-q")
    assert build.returncode == 0, build.stderr
    page = (tmp_path / "html" / "index.html").read_text()
    assert '<span class="pre">lm_<wbr>head_<wbr>vocab_<wbr>parallel</span></code>' in page
    assert "<wbr>" not in page.split('<div class="highlight')[1]  # the code block
