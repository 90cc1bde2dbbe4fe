"""``pytest --changed-since=REF``: collect only the test and doctest modules that read a file
changed since git ``REF``, as :class:`snippets.cache.inputs.Inputs` finds what they read."""

import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from snippets.cache.inputs import Inputs

ROOT = Path(__file__).resolve().parents[2]
CHANGED = pytest.StashKey[set[Path]]()
READ_BY_ALL = pytest.StashKey[set[Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--changed-since",
        metavar="REF",
        help="collect only the test and doctest modules that read a file changed since git REF "
        "(committed, staged or not, or new): what they import, transitively, the files they name",
    )


def pytest_configure(config: pytest.Config) -> None:
    """With ``--changed-since``, find what changed, and what every test reads: these plugins."""
    if (ref := config.getoption("changed_since")) is not None:
        config.stash[CHANGED] = changed_since(ref)
        plugins = Inputs(ROOT)
        for plugin in config.pluginmanager.get_plugins():
            if isinstance(plugin, ModuleType) and plugin.__name__.startswith("tests.plugins."):
                plugins.add_module(plugin.__name__)
        config.stash[READ_BY_ALL] = plugins.files


def changed_since(ref: str) -> set[Path]:
    """The files changed since ``ref``'s common ancestor with ``HEAD``, committed or not, and the
    files git does not know yet."""

    def git(*args: str) -> list[str]:
        result = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        )
        return result.stdout.split()

    (base,) = git("merge-base", ref, "HEAD")
    names = git("diff", "--name-only", base) + git("ls-files", "--others", "--exclude-standard")
    return {(ROOT / name).resolve() for name in names}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``--changed-since``, leave out a module none of whose inputs changed (the conftest
    files above it and these plugins count)."""
    if CHANGED not in config.stash or collection_path.suffix != ".py":
        return None
    relative = collection_path.resolve().relative_to(ROOT)
    name = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
    conftests = {folder / "conftest.py" for folder in collection_path.resolve().parents}
    reads = Inputs(ROOT).add_module(name).files | {collection_path.resolve()} | conftests
    reads |= config.stash[READ_BY_ALL]
    return None if reads & config.stash[CHANGED] else True
