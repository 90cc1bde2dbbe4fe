"""The site built once per test run, in the background, for the tests marked ``site``.

A test that uses ``built_site`` checks the site itself (its HTML, its warnings, its executed
notebooks) and is marked ``site``; ``-m "not site"`` leaves those out, and then nothing is built.
The build starts as soon as the tests are collected, in its own process (one for all the
processes of ``pytest -n``), and the site checks run last, so the other tests run while the
guides execute; a selection with any site check builds the whole site, and says so. It goes to
``_build/test-site``, never to the developer's ``_build/html`` or ``_build/.jupyter_cache``: its
pages are read afresh (every warning counts) unless the last build passed on the same files and
packages, and its guides execute only when what they read changed since the last run's execution
(``docs/_ext/execution_cache.py``). Results a guide and a test share
(:mod:`snippets.cache.results`) are kept beside it, in ``_build/test-site/results``. A run that
ends before its build stops the build and waits for it. ``docs/build_and_caches.md`` draws it all.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from snippets.cache.results import FOLDER

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "_build" / "test-site"
"""Where the test run's build goes: its HTML, its execution cache, its log and shared results."""

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


STATUS = "import subprocess, sys; open(sys.argv[1], 'w').write(str(subprocess.run(sys.argv[2:]).returncode))"
"""Runs a command and writes its exit status to a file (``python -c STATUS FILE COMMAND...``)."""
STARTED: list[subprocess.Popen] = []
"""The build this process started, kept: the build outlives the test that started it."""
NOTE = pytest.StashKey[str]()
"""The line the run prints about its site build, after the collection."""


def run_id(config: pytest.Config) -> str:
    """The test run's id, the same in every process of one ``pytest -n`` run (xdist's)."""
    return (
        config.workerinput["testrunuid"]
        if hasattr(config, "workerinput")
        else config.option.testrunuid
    )


def site_digest() -> str:
    """A hash of everything a site build reads: the repository's files (tracked, or new and not
    ignored; its tests left out), the Python and every installed distribution's version; "" where
    git cannot list the files (then the site is always built)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=False,
    )
    if listed.returncode:
        return ""
    digest = hashlib.sha256(sys.version.encode())
    for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):
        path = ROOT / name
        if path.is_file() and not name.startswith(("tests/", "find-barriers/tests/")):
            digest.update(f"\0{name}\0".encode() + path.read_bytes())
    packages = sorted(f"{d.name}=={d.version}" for d in importlib.metadata.distributions())
    return digest.update("\0".join(packages).encode()) or digest.hexdigest()


def build_state(name: str) -> str:
    """What ``OUT/build.NAME`` records of the last build (its run, digest or exit status); ""
    before one wrote it."""
    path = OUT / f"build.{name}"
    return path.read_text() if path.is_file() else ""


def build_command() -> list[str]:
    """``sphinx-build -W`` as ``nox -s docs`` runs it, into ``OUT`` with ``OUT``'s own execution
    cache."""
    return [
        *(sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html"),
        *("-D", f"nb_execution_cache_path={OUT / '.jupyter_cache'}"),
        *(".", str(OUT / "html")),
    ]


def start_build(run: str) -> str:
    """Start :func:`build_command` into ``OUT``, unless a process of run ``run`` already has:
    every page read again, each guide's execution taken from ``OUT``'s own cache where its inputs
    are unchanged; no build where the last one passed on the same files and packages
    (:func:`site_digest`). The build holds ``build.lock`` until it ends. Returns ``"started"``,
    ``"unchanged"`` (no build needed), or ``""`` (another process of the run saw to it)."""
    OUT.mkdir(parents=True, exist_ok=True)
    with (OUT / "build.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another process of this run is building
            return ""
        if build_state("run") == run:
            return ""
        (OUT / "build.run").write_text(run)
        digest = site_digest()
        if digest and (build_state("digest"), build_state("status")) == (digest, "0"):
            return "unchanged"  # the last build read exactly these files, with these packages
        (OUT / "build.digest").write_text(digest)
        (OUT / "build.status").unlink(missing_ok=True)
        shutil.rmtree(OUT / "html", ignore_errors=True)
        command = [sys.executable, "-c", STATUS, str(OUT / "build.status"), *build_command()]
        with (OUT / "build.log").open("w") as log:
            build = subprocess.Popen(
                command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(lock.fileno(),),  # the lock is held while the build runs
                start_new_session=True,
            )
        (OUT / "build.pid").write_text(str(build.pid))
        STARTED.append(build)
        return "started"


def stop_build() -> None:
    """Stop a build still running (its whole process group), and wait until it has ended: this
    process reaps the build it started; a build another process started has ended when it lets go
    of ``build.lock``."""
    with (OUT / "build.lock").open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with contextlib.suppress(ProcessLookupError, FileNotFoundError, ValueError):
                os.killpg(int((OUT / "build.pid").read_text()), signal.SIGKILL)
            reap_started()
            fcntl.flock(lock, fcntl.LOCK_EX)  # until the build lets go of the lock
    reap_started()


def reap_started() -> None:
    """Wait for the builds this process started (ended, or being killed): no zombie is left,
    and Python does not warn at exit that one is still running."""
    while STARTED:
        STARTED.pop().wait()


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``site`` marker; give the run an id, which xdist hands its workers."""
    config.addinivalue_line("markers", "site: checks the site this run builds (uses built_site)")
    if not hasattr(config, "workerinput"):
        config.option.testrunuid = getattr(config.option, "testrunuid", None) or uuid.uuid4().hex


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark every test that reads the site ``site``, before ``-m`` selects."""
    if "built_site" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.site)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """If a selected test reads the site, start building it now (once, however many processes
    run the tests) and run the site checks last; ``--collect-only`` runs nothing."""
    readers = [item for item in items if item.get_closest_marker("site")]
    if readers and not config.option.collectonly:
        started = start_build(run_id(config))
        items[:] = [item for item in items if item not in readers] + readers
        checks = f"{len(readers)} site check(s) selected"
        config.stash[NOTE] = {
            "started": f"{checks}: building the whole site with -W in the background, "
            f"{os.path.relpath(OUT / 'build.log', ROOT)}; -m 'not site' leaves them out",
            "unchanged": f"{checks}: the site is as its last passing build read it; not rebuilt",
        }.get(started, "")


def pytest_report_collectionfinish(config: pytest.Config) -> str | None:
    """Say, after the count of tests collected, whether the site checks build the whole site."""
    return config.stash.get(NOTE, "") or None


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop this run's build if it is still running when the run ends (early), and wait for it,
    in the process that started the others, if any; a worker that started it reaps it if it has
    ended, and otherwise leaves it to the site checks of the others and that process."""
    if hasattr(config, "workerinput"):
        if STARTED and STARTED[-1].poll() is not None:
            reap_started()
        return
    if build_state("run") == run_id(config):
        stop_build()


@pytest.fixture(scope="session")
def built_site(pytestconfig: pytest.Config) -> BuiltSite:
    """The build started at collection, finished: ``-W``, every guide's execution keyed on what it
    reads. ``nox -s reuse`` copies its executions into ``_build/.jupyter_cache`` for
    ``nox -s docs``."""
    start_build(run_id(pytestconfig))  # if collection has not
    with (OUT / "build.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # until the build ends
    log = (OUT / "build.log").read_text()
    status = build_state("status") or "none"
    assert status == "0", f"sphinx-build -W failed (exit status {status}):\n{log[-8000:]}"
    return BuiltSite(html=OUT / "html", log=log)
