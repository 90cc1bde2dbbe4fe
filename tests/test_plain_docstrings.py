"""An attribute's docstring is shown as written, though napoleon reads Google-style sections."""

from __future__ import annotations

import plain_docstrings
from tests.sphinx_project import build_project

MODULE = '''
VARIANTS = ("fused", "split")
"""The head variants, as LM-head options: fused or split."""


def head(variant: str) -> str:
    """The head.

    Args:
        variant: One of :data:`VARIANTS`.
    """
    return variant
'''


def test_a_data_docstring_with_a_colon_is_kept_and_args_are_still_read(tmp_path):
    (tmp_path / "demo.py").write_text(MODULE)
    (tmp_path / "index.rst").write_text("Demo\n====\n\n.. automodule:: demo\n   :members:\n")
    settings = f"sys.path.insert(0, {str(tmp_path)!r})\n"
    extensions = ["sphinx.ext.autodoc", plain_docstrings]
    build = build_project(tmp_path, tmp_path / "html", extensions, settings, "-q")
    assert build.returncode == 0, build.stderr
    page = (tmp_path / "html" / "index.html").read_text()
    assert "<p>The head variants, as LM-head options: fused or split.</p>" in page
    assert '<dt class="field-odd">Parameters<span class="colon">:</span></dt>' in page
