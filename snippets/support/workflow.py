"""The commands of a GitHub Actions workflow, to run here as a job's runner would."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import yaml

CHECKOUT = (
    *("pyproject.toml", "uv.lock", "README.md", ".python-version", ".github", "snippets"),
    "find-barriers",
)
"""What a job of this repository's reads from its checkout."""


class JobStep(NamedTuple):
    """One ``run:`` step: its name, its shell command and the environment it adds."""

    name: str
    command: str
    env: dict[str, str]


def job_steps(workflow: Path, job: str) -> list[JobStep]:
    """``job``'s ``run:`` steps with the environment each sees (the job's, then the step's), and
    those of each composite action of the repository it ``uses:`` (``./PATH``) in its place.
    Other actions are fetched and run by a runner only, so they are left out."""
    if not workflow.is_file():
        raise FileNotFoundError(
            f"{workflow}: no such workflow; this runs a job of the site's repository in a copy "
            "of its checkout, so it needs a clone of the repository"
        )
    spec = yaml.safe_load(workflow.read_text())["jobs"][job]
    found = []
    for step in spec["steps"]:
        env = spec.get("env", {}) | step.get("env", {})
        if "run" in step:
            found.append(JobStep(step.get("name", step["run"]), step["run"], env))
        elif step["uses"].startswith("./"):
            found += action_steps(workflow.parents[2], step["uses"], step.get("with", {}), env)
    return found


def action_steps(repository: Path, uses: str, given: dict, env: dict) -> list[JobStep]:
    """The ``run:`` steps of the composite action at ``uses`` (``./PATH``) with inputs ``given``:
    each ``${{ inputs.NAME }}`` and ``${{ github.action_path }}`` of its ``env:`` filled in."""
    spec = yaml.safe_load((repository / uses / "action.yml").read_text())
    values = {
        f"inputs.{name}": str(given.get(name, it.get("default", "")))
        for name, it in spec["inputs"].items()
    }
    values["github.action_path"] = uses

    def filled(text: str) -> str:
        found = re.fullmatch(r"\$\{\{\s*([\w.]+)\s*\}\}", str(text))
        if found is None:
            return str(text)
        if found[1] not in values:
            raise ValueError(f"{uses}/action.yml: {text} is not an input or the action's path")
        return values[found[1]]

    return [
        JobStep(
            step["name"], step["run"], env | {k: filled(v) for k, v in step.get("env", {}).items()}
        )
        for step in spec["runs"]["steps"]
    ]


def run_step(step: JobStep, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``step`` in bash with ``-e`` in ``cwd``, as a runner does, ``env`` added last."""
    command, merged = ["bash", "-e", "-c", step.command], os.environ | step.env | env
    return subprocess.run(command, env=merged, cwd=cwd, capture_output=True, text=True, check=False)


def copy_checkout(repository: Path, destination: Path) -> Path:
    """:data:`CHECKOUT` from ``repository`` into ``destination``, a checkout a job may write in."""
    for name in CHECKOUT:
        source = repository / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__")
            shutil.copytree(source, destination / name, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(source, destination / name)
    return destination
