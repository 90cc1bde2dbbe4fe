"""The tests' background site build (``tests/plugins/site_build.py``), with a stand-in for
``sphinx-build`` in a folder of its own: a run that ends first stops the build and reaps it, and a
selection with a site check says it builds the whole site."""

import fcntl
import gc
import sys
import warnings

import pytest

from tests.plugins import site_build

pytest_plugins = ["pytester"]


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """``OUT`` in ``tmp_path``, always built, no build of this process's yet."""
    monkeypatch.setattr(site_build, "OUT", tmp_path)
    monkeypatch.setattr(site_build, "site_digest", lambda: "")
    monkeypatch.setattr(site_build, "STARTED", [])
    return tmp_path


def builds(monkeypatch, code: str) -> None:
    """Make the build run ``code`` in a fresh Python instead of ``sphinx-build``."""
    monkeypatch.setattr(site_build, "build_command", lambda: [sys.executable, "-c", code])


def test_a_build_stopped_early_is_killed_and_reaped(sandbox, monkeypatch):
    builds(monkeypatch, "import time; time.sleep(300)")
    assert site_build.start_build("run") == "started"
    (build,) = site_build.STARTED
    assert build.poll() is None
    site_build.stop_build()
    assert build.returncode is not None  # waited for, so no zombie is left
    assert site_build.STARTED == []
    with (sandbox / "build.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the build has let go of it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del build
        gc.collect()
    assert [w.message for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_selection_with_a_site_check_says_it_builds_the_whole_site(
    sandbox, monkeypatch, pytester
):
    builds(monkeypatch, "print('built')")
    pytester.makepyfile(
        test_pages="def test_a_page(built_site):\n"
        "    assert built_site.log == 'built\\n'\n\n\n"
        "def test_no_page():\n"
        "    pass\n"
    )
    result = pytester.runpytest_inprocess("-p", "tests.plugins.site_build", "-k", "a_page")
    result.assert_outcomes(passed=1, deselected=1)
    result.stdout.fnmatch_lines(["1 site check(s) selected: building the whole site with -W *"])
    assert site_build.STARTED == []  # the ended build is reaped at the end of the run
    result = pytester.runpytest_inprocess("-p", "tests.plugins.site_build", "-m", "not site")
    result.assert_outcomes(passed=1, deselected=1)
    assert "site check" not in result.stdout.str()
