"""Each guide opens in Colab: with the site's repository on GitHub, the book theme's launch button
points at the guide's notebook in that repository, and that notebook is the guide."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import repository
from tests.guide_runner import guide_paths
from tests.sphinx_project import GUIDE, build_project

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".github" / "scripts" / "guide_notebooks.py"


def test_the_launch_button_opens_the_guides_notebook_on_github(tmp_path):
    """A one-guide site with the site's repository extension and a GitHub address, built: its
    page's Colab link is the notebook beside the guide, on the repository's main branch."""
    (tmp_path / "guides").mkdir()
    (tmp_path / "guides" / "demo.md").write_text(GUIDE)
    subprocess.run([sys.executable, SCRIPT, "guides/demo.md"], cwd=tmp_path, check=True)
    settings = (
        'root_doc = "guides/demo"\nhtml_theme = "sphinx_book_theme"\nnb_execution_mode = "off"\n'
        'exclude_patterns = ["_build", "guides/*.ipynb"]\n'
        'repository_address = "https://github.com/owner/name"\n'
    )
    build = build_project(
        tmp_path, tmp_path / "_build" / "html", ["myst_nb", repository], settings, "-q"
    )
    assert build.returncode == 0, build.stderr
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
