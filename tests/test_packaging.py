"""The site's companion as readers install it: its ``guides`` extra pins what uv.lock pins, and each
guide's notebook starts by installing it, at the site's version, where it is missing."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import jupytext
import pytest

import find_barriers
from tests.guide_runner import guide_paths

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
LOCKED = {
    package["name"]: package.get("version")
    for package in tomllib.loads((ROOT / "uv.lock").read_text())["package"]
}
GUIDES_EXTRA = PROJECT["project"]["optional-dependencies"]["guides"]


def name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement)[0].lower()


@pytest.mark.parametrize("requirement", GUIDES_EXTRA)
def test_the_guides_extra_pins_each_package_as_uv_lock_does(requirement):
    package, _, version = requirement.partition("==")
    assert LOCKED[package] == version


def test_the_extra_holds_what_uv_is_told_maxtext_needs():
    (maxtext,) = [d for d in PROJECT["tool"]["uv"]["dependency-metadata"] if d["name"] == "maxtext"]
    assert {name(r) for r in maxtext["requires-dist"]} <= {name(r) for r in GUIDES_EXTRA}
    assert f"maxtext=={maxtext['version']}" in GUIDES_EXTRA


def test_the_site_depends_on_the_checker_at_its_version():
    assert f"find-barriers=={find_barriers.__version__}" in PROJECT["project"]["dependencies"]


@pytest.mark.parametrize("guide", guide_paths(), ids=lambda path: path.stem)
def test_each_guide_first_installs_the_companion_where_it_is_missing(guide):
    cells = [cell for cell in jupytext.read(guide).cells if cell.cell_type == "code"]
    setup = cells[0]
    assert setup.metadata.get("tags") == ["remove-cell"]  # in the notebook, not on the page
    assert 'if importlib.util.find_spec("snippets") is None:' in setup.source
    assert f'"shard-perf-docs[guides]=={PROJECT["project"]["version"]}"' in setup.source
    assert all("snippets" not in line or "find_spec" in line for line in setup.source.splitlines())


def test_the_wheel_lists_every_package_of_snippets():
    """setuptools installs only the packages ``pyproject.toml`` names: a new one left out would be
    missing from the wheel the notebooks install."""
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for init in (ROOT / "snippets").rglob("__init__.py")
    }
    assert sorted(PROJECT["tool"]["setuptools"]["packages"]) == sorted(found)
