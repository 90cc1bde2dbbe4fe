"""The repository's address is one setting, and "Run it yourself" shows it or says how to get the source."""

from __future__ import annotations

import conf


def test_no_address_means_no_repository_links():
    assert conf.repository_options("") == {}


def test_an_address_turns_on_the_repository_links():
    options = conf.repository_options("https://example.org/owner/name")
    assert options["repository_url"] == "https://example.org/owner/name"
    assert options["use_repository_button"]
    assert "launch_buttons" not in options  # Colab opens notebooks from GitHub only


def test_a_github_address_adds_colabs_launch_button():
    options = conf.repository_options("https://github.com/owner/name")
    assert options["launch_buttons"] == {"colab_url": "https://colab.research.google.com"}


def test_run_it_yourself_shows_the_address_or_the_downloads(built_site):
    page = (built_site.html / "docs" / "run_it_yourself.html").read_text()
    for placeholder in ("ORG/REPO", "OWNER/NAME"):
        assert placeholder not in page
    if conf.REPOSITORY_URL:
        assert f'href="{conf.REPOSITORY_URL}"' in page
    else:
        assert "names no repository" in page
        assert "download menu" in page


def test_the_role_shows_and_links_the_address(monkeypatch):
    monkeypatch.setattr(conf, "REPOSITORY_URL", "https://example.org/owner/name")
    (link,), messages = conf.repository_role("repository", "{repository}`/`", "/", 1, None)
    assert messages == []
    assert link["refuri"] == "https://example.org/owner/name"
    assert link.astext() == "https://example.org/owner/name"
