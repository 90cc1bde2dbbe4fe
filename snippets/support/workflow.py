"""The commands of a GitHub Actions workflow, to run here as a job's runner would."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NamedTuple

import yaml

CHECKOUT = ("pyproject.toml", "uv.lock", "README.md", ".python-version", ".github", "snippets")
"""What a job of this repository's reads from its checkout."""


class JobStep(NamedTuple):
    """One ``run:`` step: its name, its shell command and the environment it adds."""

    name: str
    command: str
    env: dict[str, str]


def job_steps(workflow: Path, job: str) -> list[JobStep]:
    """``job``'s ``run:`` steps with the environment each sees (the job's, then the step's);
    ``uses:`` steps are actions, which only a runner runs, so they are left out."""
    spec = yaml.safe_load(workflow.read_text())["jobs"][job]
    return [
        JobStep(
            step.get("name", step["run"]), step["run"], spec.get("env", {}) | step.get("env", {})
        )
        for step in spec["steps"]
        if "run" in step
    ]


def run_step(step: JobStep, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    """Run ``step`` in bash with ``-e`` in ``cwd``, as a runner does, ``env`` added last."""
    return subprocess.run(
        ["bash", "-e", "-c", step.command],
        env=os.environ | step.env | env,
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


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
