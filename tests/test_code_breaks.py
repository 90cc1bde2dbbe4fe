"""Inline code gets a break opportunity after each underscore or dot between two words of a name,
and nothing else changes."""

from __future__ import annotations

import code_breaks
from code_breaks import break_between_words
from tests.sphinx_project import build_project


def test_inner_underscores_and_dots_get_a_break_and_tags_and_edges_do_not():
    html = (
        '<code class="xref py py-func docutils literal notranslate">'
        '<span class="pre">_private_name</span> <span class="pre">x__y_</span></code>'
        '<code class="docutils literal notranslate"><span class="pre">jax.sharding.reshard(x).at[0].set</span></code>'
    )
    assert break_between_words(html) == (
        '<code class="xref py py-func docutils literal notranslate">'
        '<span class="pre">_private_<wbr>name</span> <span class="pre">x__y_</span></code>'
        '<code class="docutils literal notranslate"><span class="pre">jax.<wbr>sharding.<wbr>reshard(x).<wbr>at[0].<wbr>set</span></code>'
    )


def test_numbers_and_code_outside_inline_literals_do_not_change():
    version = '<code class="docutils literal notranslate"><span class="pre">0.2.5</span></code>'
    block = '<pre><span class="n">lm_head.kernel</span></pre><p>snake_case prose.</p>'
    assert break_between_words(version + block) == version + block


def test_a_built_page_breaks_inline_code_but_not_code_blocks(tmp_path):
    (tmp_path / "index.md").write_text(
        "# Flags\n\nSet `lm_head_vocab_parallel`.\n\n```python\nlm_head_vocab_parallel = True\n```\n"
    )
    build = build_project(tmp_path, tmp_path / "html", ["myst_parser", code_breaks], "", "-q")
    assert build.returncode == 0, build.stderr
    page = (tmp_path / "html" / "index.html").read_text()
    assert '<span class="pre">lm_<wbr>head_<wbr>vocab_<wbr>parallel</span></code>' in page
    assert "<wbr>" not in page.split('<div class="highlight')[1]  # the code block
