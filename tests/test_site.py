"""The site builds with warnings as errors (see ``built_site``), and every card leads somewhere real."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import pytest


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


def test_root_opens_the_landing_page(site):
    assert 'url=docs/index.html"' in (site / "index.html").read_text()
    assert (site / "docs" / "index.html").exists()


@pytest.mark.parametrize("page", ["docs/index.html", "guides/index.html"])
def test_every_card_links_to_a_page_that_exists(site, page):
    links = card_links(site / page)
    assert len(links) >= 1
    for href in links:
        target = (site / page).parent / href.split("#")[0]
        assert target.resolve().is_file(), f"{page}: card links to missing {href}"


def test_landing_page_cards(site):
    assert len(card_links(site / "docs" / "index.html")) == 4


def test_the_site_has_a_404_page(site):
    page = (site / "404.html").read_text()
    assert "404" in page
