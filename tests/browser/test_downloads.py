"""A guide downloaded from the site runs where it lands: the site's wheel and find-barriers',
installed with the ``guides`` extra at the versions uv.lock pins into a fresh environment outside
the checkout, execute each notebook the download menu offers, in an empty folder, with nbclient.

A guide that needs a clone of the repository says so on its page, and its notebook stops, with
that reason, at the cell that needs it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guide_runner import guide_paths

ROOT = Path(__file__).resolve().parents[2]
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
NEEDS_THE_CLONE = {"check_a_run": "needs a clone of the repository"}
"""Guides whose notebook stops outside a clone, with the words its page and the error say."""
RUN = """import json, sys, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
notebook = nbformat.read(sys.argv[1], as_version=4)
client = NotebookClient(notebook, timeout=900, kernel_name="python3")
try:
    client.execute()
    print(json.dumps({"failed": None}))
except CellExecutionError as error:
    cells = [c for c in notebook.cells if c.cell_type == "code"]
    failed = next(i for i, c in enumerate(cells) if any(o.get("output_type") == "error" for o in c.get("outputs", [])))
    print(json.dumps({"failed": failed, "of": len(cells), "error": f"{error.ename}: {error.evalue}"}))
"""
"""Execute a notebook in this environment's kernel; print which code cell failed, if one did."""


def uv(*args: str, cwd: Path = ROOT) -> None:
    subprocess.run([UV, *args], check=True, capture_output=True, cwd=cwd)


@pytest.fixture(scope="session")
def fresh_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new environment outside the checkout holding the two wheels, the ``guides`` extra at the
    locked versions, and so Jupyter's kernel (the extra's myst-nb brings it)."""
    made = tmp_path_factory.mktemp("reader")
    for project in (".", "find-barriers"):
        uv("build", "--quiet", "--wheel", "--out-dir", str(made / "dist"), project)
    constraints = made / "constraints.txt"
    uv(
        *("export", "--quiet", "--frozen", "--extra", "guides", "--no-dev", "--no-emit-project"),
        *("--no-emit-package", "find-barriers", "--no-hashes", "--output-file", str(constraints)),
    )
    uv("venv", "--quiet", "--python", sys.executable, str(made / "venv"))
    python = made / "venv" / "bin" / "python"
    (site_wheel,) = (made / "dist").glob("shard_perf_docs-*.whl")
    (checker_wheel,) = (made / "dist").glob("find_barriers-*.whl")
    uv(
        *("pip", "install", "--quiet", "--python", str(python), "--constraints", str(constraints)),
        *(f"{site_wheel}[guides]", str(checker_wheel)),
    )
    return python


@pytest.mark.parametrize("guide", [path.stem for path in guide_paths()])
def test_a_downloaded_guide_runs_in_a_fresh_environment(site, fresh_python, guide, tmp_path):
    notebook = site / "_sources" / "guides" / f"{guide}.ipynb"
    assert notebook.is_file(), f"the site offers no {notebook.name} for download"
    env = {"PATH": f"{fresh_python.parent}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/tmp")}
    result = subprocess.run(
        [fresh_python, "-c", RUN, str(notebook)],
        cwd=tmp_path,  # an empty folder: nothing of the checkout to import or read
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout.splitlines()[-1])
    if guide not in NEEDS_THE_CLONE:
        assert outcome == {"failed": None}, outcome
        return
    words = NEEDS_THE_CLONE[guide]
    assert words in " ".join((site / "guides" / f"{guide}.html").read_text().split())
    assert words in outcome["error"], outcome
    assert outcome["failed"] > outcome["of"] // 2, outcome  # the rest of the page ran
