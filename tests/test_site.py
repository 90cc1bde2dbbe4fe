"""The site builds with warnings as errors (see ``built_site``), and every card leads somewhere real."""

from __future__ import annotations

import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from find_barriers import RULES
from tests.guide_runner import guide_paths


class _CardLinks(HTMLParser):
    """Collects the targets of sphinx-design card links on a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "a" and "sd-stretched-link" in (attributes.get("class") or ""):
            self.links.append(attributes["href"])


def card_links(page: Path) -> list[str]:
    """The href of every card on a built page."""
    parser = _CardLinks()
    parser.feed(page.read_text())
    return parser.links


@pytest.fixture(scope="module")
def site(built_site) -> Path:
    """The HTML directory of this test run's one site build."""
    return built_site.html


def test_root_opens_the_landing_page_with_the_sites_icon(site):
    root = (site / "index.html").read_text()
    assert 'url=docs/index.html"' in root
    assert (site / "docs" / "index.html").exists()
    (icon,) = re.findall(r'<link rel="icon" href="([^"]+)"', root)  # no request for /favicon.ico
    assert (site / icon).is_file()


@pytest.mark.parametrize("page", ["docs/index.html", "guides/index.html"])
def test_every_card_links_to_a_page_that_exists(site, page):
    links = card_links(site / page)
    assert len(links) >= 1
    for href in links:
        target = (site / page).parent / href.split("#")[0]
        assert target.resolve().is_file(), f"{page}: card links to missing {href}"


@pytest.mark.parametrize("code", sorted(RULES))
def test_each_find_barriers_rule_links_to_the_section_that_fixes_it(site, code):
    """A rule's help URL is the site's address, a built page and an anchor on it."""
    page, _, anchor = RULES[code].section.partition("#")
    assert RULES[code].url.endswith("/" + RULES[code].section)
    assert f'id="{anchor}"' in (site / page).read_text(), f"{code}: {page} has no #{anchor}"


def test_every_guide_has_a_card_on_the_guides_page(site):
    cards = {href.split("#")[0] for href in card_links(site / "guides" / "index.html")}
    assert cards == {f"{guide.stem}.html" for guide in guide_paths()}


def test_the_404_page_says_so_and_links_home_from_any_depth(site):
    page = (site / "404.html").read_text()
    assert "<h1>Page not found</h1>" in page
    assert 'href="/docs/index.html"' in page  # absolute: it is served for any missing path


def test_a_broken_cross_reference_fails_the_build(tmp_path):
    """nitpicky: a {py:func} to nothing is a warning, and -W makes it an error, as in ``nox``."""
    root = Path(__file__).resolve().parent.parent
    (tmp_path / "docs").mkdir()
    page = "# Page\n\nSee {py:func}`snippets.lowering.no_such_function`.\n"
    (tmp_path / "docs" / "index.md").write_text(page)
    command = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", "-c", str(root)]
    result = subprocess.run(
        [*command, str(tmp_path), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
    )
    assert result.returncode != 0
    assert "py:func reference target not found: snippets.lowering.no_such_function" in result.stderr
