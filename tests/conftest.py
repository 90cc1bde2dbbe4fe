"""The site built once per test run: every guide executes exactly once, in this build."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class BuiltSite:
    """Where one ``-W`` build put its HTML and the notebooks it executed."""

    html: Path
    executed: Path
    log: str

    def executed_notebook(self, guide: Path) -> Path:
        """The ``.ipynb`` this build executed for ``guide`` (a path under ``guides/``)."""
        return self.executed / guide.resolve().relative_to(ROOT).with_suffix(".ipynb")


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> BuiltSite:
    """Build the site as ``nox -s docs`` does, but into a temporary folder with an empty cache.

    The empty execution cache makes every guide execute once, in a fresh kernel;
    the developer's ``_build/`` is neither read nor written.
    """
    out = tmp_path_factory.mktemp("site")
    command = [
        *(sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html"),
        *("-D", f"nb_execution_cache_path={out / '.jupyter_cache'}"),
        *(".", str(out / "html")),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    log = result.stdout + result.stderr
    assert result.returncode == 0, f"sphinx-build -W failed:\n{log[-8000:]}"
    return BuiltSite(html=out / "html", executed=out / "jupyter_execute", log=log)
