"""Every task of the project: lint, tests, docs, and the helpers around them.

``nox`` runs the default sessions (lint, tests); ``nox -s docs`` builds the site.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.needs_version = ">=2024.10"
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.reuse_existing_virtualenvs = True

PYPROJECT = nox.project.load_toml("pyproject.toml")
HTML = Path("_build/html")


def install(session: nox.Session, *groups: str) -> None:
    """Install this project (editable) and the named dependency groups."""
    session.install("-e", ".", *nox.project.dependency_groups(PYPROJECT, *groups))


@nox.session(default=True)
def lint(session: nox.Session) -> None:
    """Ruff (check and format) on Python; mdformat with mdformat-myst on the Markdown."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mdformat", "--check", "--number", "docs", "guides")


@nox.session(default=True)
def tests(session: nox.Session) -> None:
    """Snippet tests, doctests, every guide executed, and the site built with -W."""
    install(session, "test")
    session.run("pytest", *(session.posargs or ["-v"]))


@nox.session(default=False)
def docs(session: nox.Session) -> None:
    """Build the HTML site, executing the guides (cached); warnings are errors."""
    install(session, "docs")
    session.run(
        "sphinx-build", "-W", "--keep-going", "-b", "html", ".", str(HTML), *session.posargs
    )
    session.log(f"Site built: open {HTML / 'index.html'}")


@nox.session(default=False)
def serve(session: nox.Session) -> None:
    """Rebuild the site on every change and serve it at http://127.0.0.1:8000."""
    install(session, "serve")
    session.run(
        "sphinx-autobuild",
        *("-b", "html", ".", str(HTML), "--watch", "snippets"),
        *("--ignore", "_build/*", "--ignore", ".nox/*"),
        *session.posargs,
    )


@nox.session(default=False)
def notebooks(session: nox.Session) -> None:
    """Executed ``.ipynb`` copies of every guide in ``_build/notebooks``, for Jupyter users."""
    install(session, "docs")
    session.run("python", "tests/guide_runner.py", "--out", "_build/notebooks", *session.posargs)


@nox.session(default=False, venv_backend="none")
def clean(session: nox.Session) -> None:
    """Remove the build outputs, execution cache included."""
    shutil.rmtree("_build", ignore_errors=True)
