"""Each guide opens in Colab: with the site's repository on GitHub, the book theme's launch button
points at the guide's notebook in that repository, and that notebook is the guide."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import conf
from tests.guide_runner import guide_paths

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".github" / "scripts" / "guide_notebooks.py"
GUIDE = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
---

# A guide

```{code-cell} ipython3
1 + 1
```
"""


def test_the_launch_button_opens_the_guides_notebook_on_github(tmp_path):
    """A one-guide site with the site's theme options for a GitHub address, built: its page's
    Colab link is the notebook beside the guide, on the repository's main branch."""
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "demo.md").write_text(GUIDE)
    subprocess.run([sys.executable, SCRIPT, "guides/demo.md"], cwd=tmp_path, check=True)
    options = conf.repository_options("https://github.com/owner/name")
    (tmp_path / "conf.py").write_text(
        f'extensions = ["myst_nb"]\nroot_doc = "guides/demo"\nhtml_theme = "sphinx_book_theme"\n'
        f'nb_execution_mode = "off"\n'
        f"exclude_patterns = {conf.exclude_patterns!r}\nhtml_theme_options = {options!r}\n"
    )
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", ".", "_build/html"]
    subprocess.run(command, cwd=tmp_path, check=True, capture_output=True)
    page = (tmp_path / "_build" / "html" / "guides" / "demo.html").read_text()
    url = "https://colab.research.google.com/github/owner/name/blob/main/guides/demo.ipynb"
    assert f'href="{url}"' in page


def test_every_guide_has_its_notebook_beside_it_written_from_it():
    guides = [str(path.relative_to(ROOT)) for path in guide_paths()]
    result = subprocess.run(
        [sys.executable, SCRIPT, "--check", *guides],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (0, "")
    assert all((ROOT / guide).with_suffix(".ipynb").is_file() for guide in guides)
