"""find-barriers installed as a user installs it: alone, in a fresh environment of Python 3.11 (a
Python below the site's own floor, where found), beside another distribution's top-level
``snippets`` package. (``nox -s checker`` runs its tests under each Python 3.10 to 3.13.)"""

import hashlib
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "find-barriers"
UV = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
"""The test environment's uv (the ``test`` group installs it)."""
OTHER = {
    "pyproject.toml": '[project]\nname = "other-snippets"\nversion = "1"\n'
    '[tool.setuptools]\npackages = ["snippets", "snippets.hlo"]\n',
    "snippets/__init__.py": '"""Another project\'s snippets."""\n',
    "snippets/hlo/__init__.py": "OTHER = True\n",
}
"""A distribution with a top-level ``snippets`` package, as the site's own wheel has."""


def uv(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([UV, *args], capture_output=True, text=True, check=True, cwd=cwd)


def interpreter(version: str) -> str:
    """The interpreter of ``version`` uv finds here; the test skips where there is none."""
    found = subprocess.run(
        [UV, "python", "find", "--no-project", version], capture_output=True, text=True, check=False
    )
    if found.returncode:
        pytest.skip(f"no Python {version} here")
    return found.stdout.strip()


def files(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*.py")
    }


@pytest.fixture(scope="module", params=["3.11"])
def installed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A fresh environment of a Python below the site's own floor, holding ``other-snippets``,
    then find-barriers from its folder."""
    made = tmp_path_factory.mktemp("install")
    for name, text in OTHER.items():
        (made / "other" / name).parent.mkdir(parents=True, exist_ok=True)
        (made / "other" / name).write_text(text)
    uv("venv", "--quiet", "--python", interpreter(request.param), str(made / "venv"))
    python = made / "venv" / "bin" / "python"
    uv("pip", "install", "--quiet", "--python", str(python), str(made / "other"))
    site_packages = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    before = files(site_packages / "snippets")
    uv("pip", "install", "--quiet", "--python", str(python), str(CHECKER))
    return {
        "python": python,
        "bin": python.parent,
        "snippets": site_packages / "snippets",
        "before": before,
        "made": made,
    }


def test_the_checker_declares_no_dependency_and_its_own_floor():
    project = tomllib.loads((CHECKER / "pyproject.toml").read_text())["project"]
    assert (project["dependencies"], project["requires-python"]) == ([], ">=3.10")
    site = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(d.startswith("find-barriers==") for d in site["project"]["dependencies"])
    assert site["tool"]["uv"]["sources"]["find-barriers"]["path"] == "find-barriers"


def test_nothing_in_the_checker_names_the_site_package():
    package = CHECKER / "src" / "find_barriers"
    named = [
        p
        for p in package.rglob("*.py*")
        if p.suffix in (".py", ".json") and "snippets" in p.read_text()
    ]
    assert named == []


def test_installing_it_changes_no_file_of_another_snippets_package(installed):
    assert files(installed["snippets"]) == installed["before"]
    listed = uv(
        "pip", "show", "--files", "--python", str(installed["python"]), "find-barriers"
    ).stdout
    assert "snippets" not in listed
    uv("pip", "uninstall", "--quiet", "--python", str(installed["python"]), "find-barriers")
    assert files(installed["snippets"]) == installed["before"]
    uv("pip", "install", "--quiet", "--python", str(installed["python"]), str(CHECKER))


def test_it_runs_and_checks_a_dump_under_each_older_python(installed, tmp_path):
    command = installed["bin"] / "find-barriers"
    version = subprocess.run([command, "--version"], capture_output=True, text=True, check=False)
    assert (version.returncode, version.stdout.startswith("find-barriers ")) == (0, True)
    dump = CHECKER / "tests" / "data" / "three_layers.hlo.txt"
    # a local snippets/ folder on the path, as in a clone of this site, changes nothing
    (tmp_path / "snippets").mkdir()
    (tmp_path / "snippets" / "__init__.py").write_text("raise ImportError('not this one')\n")
    env = {"PATH": str(installed["bin"]), "PYTHONPATH": str(tmp_path)}
    result = subprocess.run(
        [command, str(dump), "--quiet"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
        env=env,
    )
    assert (result.returncode, result.stderr, result.stdout.count(": FB001 ")) == (1, "", 3)
