"""A rebuild with nothing changed reports no changed configuration, though the site's theme and
extensions change it in place; a real change is still reported, and pages use the values in use."""

from __future__ import annotations

import subprocess
from pathlib import Path

import config_as_read
from tests.sphinx_project import build_project

# The site's theme and the extensions that change the configuration after Sphinx compares it.
SETTINGS = """
html_theme = "sphinx_book_theme"
html_static_path = ["static"]
html_css_files = ["custom.css"]
html_js_files = [("custom.js", {"defer": "defer"})]
"""
CHANGED = "The configuration has changed"


def build(project: Path, extensions: list, settings: str = SETTINGS) -> subprocess.CompletedProcess:
    """Build ``project`` into its ``html`` folder with the theme, copybutton and design."""
    result = build_project(
        project, project / "html", ["sphinx_copybutton", "sphinx_design", *extensions], settings
    )
    assert result.returncode == 0, result.stderr
    return result


def make_project(tmp_path: Path) -> Path:
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "custom.css").write_text("body {}\n")
    (tmp_path / "static" / "custom.js").write_text("\n")
    (tmp_path / "index.rst").write_text("Home\n====\n\nText.\n")
    return tmp_path


def test_an_unchanged_rebuild_reports_no_changed_configuration(tmp_path):
    project = make_project(tmp_path)
    build(project, [config_as_read])
    second = build(project, [config_as_read])
    assert "loading pickled environment... done" in second.stdout
    assert CHANGED not in second.stdout


def test_without_it_the_theme_and_extensions_changes_read_as_a_change(tmp_path):
    project = make_project(tmp_path)
    build(project, [])
    second = build(project, [])
    assert f"{CHANGED} (" in second.stdout
    for option in ("html_permalinks_icon", "html_static_path", "html_css_files"):
        assert repr(option) in second.stdout


def test_a_changed_option_is_still_reported(tmp_path):
    project = make_project(tmp_path)
    build(project, [config_as_read])
    second = build(project, [config_as_read], SETTINGS + 'html_css_files = ["other.css"]\n')
    # epub_css_files defaults to html_css_files.
    assert f"{CHANGED} (2 options: 'epub_css_files', 'html_css_files')" in second.stdout


def test_pages_written_after_the_environment_is_stored_use_the_values_in_use(tmp_path):
    project = make_project(tmp_path)
    build(project, [config_as_read])
    (project / "index.rst").write_text("Home\n====\n\nOther text.\n")
    build(project, [config_as_read])
    page = (project / "html" / "index.html").read_text()
    assert "Other text." in page
    # The PyData theme's permalink icon, set after the comparison (Sphinx's own is a pilcrow).
    assert 'title="Link to this heading">#</a>' in page
    assert "copybutton.js" in page
    assert (project / "html" / "_static" / "copybutton.js").is_file()
