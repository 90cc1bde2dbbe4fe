"""The site built once per test run, in the background: every guide executes exactly once.

The build starts as soon as the tests are collected, in its own process, and the tests that
read it run last, so on a machine with two cores the snippet tests run while the guides
execute.
"""

from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "_build" / "test-site"
"""Where the test run's build goes: its HTML, its execution cache and its log."""
EXECUTION_CACHE = ROOT / "_build" / ".jupyter_cache"
"""The cache ``conf.py`` names, which ``nox -s docs`` and ``nox -s browser`` read."""
BUILD = pytest.StashKey[subprocess.Popen]()


@dataclasses.dataclass(frozen=True)
class BuiltSite:
    """Where one ``-W`` build put its HTML and the notebooks it executed."""

    html: Path
    executed: Path
    log: str

    def executed_notebook(self, guide: Path) -> Path:
        """The ``.ipynb`` this build executed for ``guide`` (a path under ``guides/``)."""
        return self.executed / guide.resolve().relative_to(ROOT).with_suffix(".ipynb")

    def glued(self, guide: str, name: str) -> Any:
        """The Python literal ``guides/<guide>.md`` glued (myst-nb) as ``name`` in this build."""
        notebook = nbformat.read(self.executed_notebook(ROOT / "guides" / f"{guide}.md"), 4)
        for cell in notebook.cells:
            for output in cell.get("outputs", []):
                if output.get("metadata", {}).get("scrapbook", {}).get("name") == name:
                    text = next(v for k, v in output["data"].items() if k.endswith("text/plain"))
                    return ast.literal_eval(text)
        raise KeyError(f"{guide}.md glues no {name!r}")


def start_build() -> subprocess.Popen:
    """Start ``sphinx-build -W`` as ``nox -s docs`` runs it, into ``OUT`` with an empty cache."""
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    command = [
        *(sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html"),
        *("-D", f"nb_execution_cache_path={OUT / '.jupyter_cache'}"),
        *(".", str(OUT / "html")),
    ]
    with (OUT / "build.log").open("w") as log:
        return subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """If a test reads the site, start building it now and run the tests that read it last;
    ``--collect-only`` runs nothing, so builds nothing."""
    readers = [item for item in items if "built_site" in getattr(item, "fixturenames", ())]
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
    """The build started at collection, finished: ``-W``, every guide executed in a fresh kernel.

    The developer's ``_build/html`` is neither read nor written. After a clean build its
    execution cache replaces ``_build/.jupyter_cache``, so the next ``nox -s docs`` or
    ``nox -s browser`` renders these executions instead of running every guide again.
    """
    build = pytestconfig.stash.get(BUILD, None) or start_build()
    build.wait()
    log = (OUT / "build.log").read_text()
    assert build.returncode == 0, f"sphinx-build -W failed:\n{log[-8000:]}"
    shutil.rmtree(EXECUTION_CACHE, ignore_errors=True)
    shutil.copytree(OUT / ".jupyter_cache", EXECUTION_CACHE)
    return BuiltSite(html=OUT / "html", executed=OUT / "jupyter_execute", log=log)


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
