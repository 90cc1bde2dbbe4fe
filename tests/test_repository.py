"""The repository's address is one setting, and "Run it yourself" shows it or says how to get the source."""

from __future__ import annotations

import pytest

import conf
import repository
from repository import repository_options
from tests.sphinx_project import build_project


def test_no_address_means_no_repository_links():
    assert repository_options("") == {}


def test_an_address_turns_on_the_repository_links():
    options = repository_options("https://gitlab.com/owner/name")
    buttons = ("repository", "source", "edit_page", "issues")
    assert options == {  # no Colab button: Colab opens notebooks from GitHub only
        "repository_url": "https://gitlab.com/owner/name",
        "repository_branch": "main",
        "path_to_docs": "",
        **{f"use_{button}_button": True for button in buttons},
    }


def test_a_github_address_adds_colabs_launch_button():
    options = repository_options("https://github.com/owner/name")
    assert options["launch_buttons"] == {"colab_url": "https://colab.research.google.com"}


def test_run_it_yourself_shows_the_address_or_the_downloads(built_site):
    page = (built_site.html / "docs" / "run_it_yourself.html").read_text()
    for placeholder in ("ORG/REPO", "OWNER/NAME"):
        assert placeholder not in page
    if conf.repository_address:
        assert f'href="{conf.repository_address}"' in page
    else:
        assert "names no repository" in page
        assert "download menu" in page


PAGE = """# Source

```{only} repository
Get it at {repository}`/`.
```

```{only} not repository
No address.
```
"""


@pytest.mark.parametrize("address", ["", "https://github.com/owner/name"])
def test_the_tag_and_the_role_show_the_address_when_one_is_set(tmp_path, address):
    (tmp_path / "index.md").write_text(PAGE)
    settings = (
        f'html_theme = "sphinx_book_theme"\nrepository_address = {address!r}\n'  # its options
    )
    build = build_project(tmp_path, tmp_path / "html", ["myst_parser", repository], settings, "-q")
    assert build.returncode == 0, build.stderr
    page = (tmp_path / "html" / "index.html").read_text()
    assert ("Get it at" in page, "No address." in page) == (bool(address), not address)
    if address:  # the whole address, linked
        assert f'href="{address}"><code class="docutils literal notranslate">' in page
        assert f'<span class="pre">{address}</span>' in page


def test_the_role_takes_only_a_slash(tmp_path):
    (tmp_path / "index.md").write_text("# Source\n\n{repository}`/owner`\n")
    settings = 'repository_address = "https://github.com/owner/name"\n'
    build = build_project(tmp_path, tmp_path / "html", ["myst_parser", repository], settings, "-q")
    assert "{repository} takes only '/' (the repository's address), not '/owner'" in build.stderr


def test_an_address_the_theme_cannot_link_fails_the_build_by_name(tmp_path):
    (tmp_path / "index.md").write_text("# Source\n")
    settings = 'html_theme = "sphinx_book_theme"\nrepository_address = "https://example.org/o/n"\n'
    build = build_project(tmp_path, tmp_path / "html", ["myst_parser", repository], settings, "-q")
    assert build.returncode != 0
    expected = "'https://example.org/o/n' is not on github.com, gitlab.com, bitbucket.org"
    assert expected in build.stderr
    assert "Traceback" not in build.stderr
