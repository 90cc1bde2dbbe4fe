"""The site built once per test run, in the background, for the tests marked ``site``.

A test that uses ``built_site`` checks the site itself (its HTML, its warnings, its executed
notebooks) and is marked ``site``; ``-m "not site"`` leaves those out, and then nothing is built.
The build starts as soon as the tests are collected, in its own process, and the site checks run
last, so the other tests run while the guides execute. It goes to ``_build/test-site``, never to
the developer's ``_build/html`` or ``_build/.jupyter_cache``: its pages are read afresh each run
(every warning counts), and its guides execute only when what they read changed since the last
run's execution (``conf.py``). Results a guide and a test share (:mod:`snippets.support.results`)
are kept beside it, in ``_build/test-site/results``.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from snippets.support.results import FOLDER

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "test-site"
"""Where the test run's build goes: its HTML, its execution cache, its log and shared results."""
BUILD = pytest.StashKey[subprocess.Popen]()

os.environ.setdefault(FOLDER, str(OUT / "results"))  # for these tests and the guides they build


@dataclasses.dataclass(frozen=True)
class BuiltSite:
    """Where one ``-W`` build put its HTML, and its log."""

    html: Path
    log: str

    def executed_notebook(self, guide: Path) -> Path:
        """The executed ``.ipynb`` the page of ``guide`` (a path under ``guides/``) was rendered
        from, outputs included, as the page offers it for download."""
        return self.html / "_sources" / guide.resolve().relative_to(ROOT).with_suffix(".ipynb")


def start_build() -> subprocess.Popen:
    """Start ``sphinx-build -W`` as ``nox -s docs`` runs it, into ``OUT``: every page read again,
    the guides' executions from ``OUT``'s own cache where their inputs are unchanged."""
    shutil.rmtree(OUT / "html", ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    command = [
        *(sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html"),
        *("-D", f"nb_execution_cache_path={OUT / '.jupyter_cache'}"),
        *(".", str(OUT / "html")),
    ]
    with (OUT / "build.log").open("w") as log:
        return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``site`` marker."""
    config.addinivalue_line("markers", "site: checks the site this run builds (uses built_site)")


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark every test that reads the site ``site``, before ``-m`` selects."""
    if "built_site" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.site)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """If a selected test reads the site, start building it now and run the site checks last;
    ``--collect-only`` runs nothing, so builds nothing."""
    readers = [item for item in items if item.get_closest_marker("site")]
    if readers and not config.option.collectonly:
        config.stash[BUILD] = start_build()
        items[:] = [item for item in items if item not in readers] + readers


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop a build that is still running when the run ends early."""
    if (build := config.stash.get(BUILD, None)) is not None and build.poll() is None:
        build.kill()
        build.wait()


@pytest.fixture(scope="session")
def built_site(pytestconfig: pytest.Config) -> BuiltSite:
    """The build started at collection, finished: ``-W``, every guide's execution keyed on what it
    reads. ``nox -s reuse`` copies its executions into ``_build/.jupyter_cache`` for
    ``nox -s docs``."""
    build = pytestconfig.stash.get(BUILD, None) or start_build()
    build.wait()
    log = (OUT / "build.log").read_text()
    assert build.returncode == 0, f"sphinx-build -W failed:\n{log[-8000:]}"
    return BuiltSite(html=OUT / "html", log=log)


@pytest.fixture
def one_error_line(capsys):
    """``run(main, argv)``: expect exit status 2, nothing on stdout and a single ``error:`` line on
    stderr, and return that line."""

    def run(main, argv: list[str]) -> str:
        with pytest.raises(SystemExit) as exit_info:
            main(argv)
        assert exit_info.value.code == 2
        captured = capsys.readouterr()
        lines = captured.err.splitlines()
        assert len(lines) == 1, captured.err
        assert lines[0].startswith("error: "), captured.err
        assert captured.out == ""
        return lines[0]

    return run
