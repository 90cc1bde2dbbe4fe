"""The light install: the project alone (``uv tool install .``) is find-barriers without JAX."""

import subprocess
import sys
import tomllib
from pathlib import Path

import jax

from tests.test_barrier_check_ci import X, dump, loss, params

ROOT = Path(__file__).resolve().parent.parent
HEAVY = {"jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "pydantic"}
"""The guides' stack, which the ``guides`` dependency group holds instead; the check needs none."""


def locked_closure(name: str) -> set[str]:
    """Every package ``uv.lock`` installs with ``name``, no dependency group or extra included."""
    packages = {p["name"]: p for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]}
    found, todo = set(), [name]
    while todo:
        package = packages[todo.pop()]
        for dependency in package.get("dependencies", []):
            if dependency["name"] not in found:
                found.add(dependency["name"])
                todo.append(dependency["name"])
    return found


def test_the_project_alone_locks_none_of_the_guides_stack():
    assert locked_closure("flax") & HEAVY  # the walk finds a dependency where there is one
    assert not locked_closure("shard-perf-docs") & HEAVY


BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"jax", "jaxlib", "flax", "optax", "orbax", "numpy", "pydantic"}:
            raise ImportError(f"the light install has no {name}")
sys.meta_path.insert(0, Block())
from find_barriers.cli import main
sys.exit(main())
"""


def test_find_barriers_runs_with_the_guides_stack_unimportable(tmp_path):
    directory = dump(tmp_path, jax.grad(loss), params("dense", "head"), X)

    def run(*prefix: str) -> tuple[int, str, str]:
        command = [sys.executable, *prefix, str(directory)]
        result = subprocess.run(command, capture_output=True, text=True, check=False, cwd=ROOT)
        return result.returncode, result.stdout, result.stderr

    blocked = run("-c", BLOCK)
    assert blocked == run("-m", "snippets", "find-barriers")
    assert blocked[0] == 1, blocked  # a real answer: the dump's fold is blocked
