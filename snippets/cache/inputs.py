"""What code reads, found from its source without running it: the repository's modules it imports,
transitively, the files they name, and the installed packages they import, at their versions.

A guide's execution (``docs/_ext/execution_cache.py``) and a shared result
(:mod:`snippets.cache.results`) are keyed on these, so that editing a module re-runs only what
imports it. Imports anywhere in a module count, inside functions too, and so does ``python -m NAME``
written as a command's ``"-m", "NAME"``; a module imported by a computed name is not seen.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import itertools
import os
import re
import sys
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

PATH_LIKE = re.compile(r"[\w.-]+(/[\w.-]+)*")
"""A string that may name a file or folder: relative, no spaces (``"version_matrix.json"``)."""
NOT_INPUTS = frozenset({".git", "_build", ".nox", ".venv", "node_modules", "__pycache__"})
"""Folders whose files are never inputs: git's store, build outputs, environments, bytecode;
and so is every tool's own folder, a hidden one (``.pytest_cache``) or one of :data:`BUILT`,
when a folder a guide names holds one."""
BUILT = ("build", "dist", ".egg-info")
"""A package's build outputs: setuptools' ``build`` and ``*.egg-info``, ``dist``."""
Reads = tuple[frozenset[str], frozenset[Path]]
"""The modules some code imports and the files it names."""


def module_file(name: str, root: Path) -> Path | None:
    """The file of module ``name`` (a package's ``__init__.py``) when the repository at ``root``
    holds it, found where Python would import it from, without importing it; else ``None``."""
    top, *rest = name.split(".")
    try:
        spec = importlib.util.find_spec(top)  # nothing is imported
    except (ImportError, ValueError):  # ValueError: a module without a spec, such as __main__
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin)
    for part in rest:
        folder = path.parent / part
        path = folder / "__init__.py" if folder.is_dir() else folder.with_suffix(".py")
    return path.resolve() if path.is_file() and _in_repository(path, root) else None


def _in_repository(path: Path, root: Path) -> bool:
    """Whether ``path`` is the repository's own code, not an installed copy (``.nox``, ``.venv``)."""
    path, root = path.resolve(), root.resolve()
    parts = path.relative_to(root).parts if path.is_relative_to(root) else (".",)
    return not any(part.startswith(".") or part == "site-packages" for part in parts)


def _imported(tree: ast.AST, package: str) -> set[str]:
    """Every module name ``tree`` imports, relative imports resolved in ``package``, with each
    ``NAME`` of ``"-m", "NAME"`` (and ``NAME.__main__``): what ``python -m NAME`` runs."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")[: len(package.split(".")) + 1 - node.level]
            module = ".".join([*parts, *[node.module or ""]] if node.level else [node.module or ""])
            module = module.strip(".")
            names |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    for run in _run_as_main(tree).values():
        names |= {run, f"{run}.__main__"}
    return names


def _run_as_main(tree: ast.AST) -> dict[int, str]:
    """The ``NAME`` of each ``"-m", "NAME"`` pair in a list or tuple (a command's module), by the
    ``id`` of the constant that names it."""
    found = {}
    for node in ast.walk(tree):
        for flag, name in itertools.pairwise(getattr(node, "elts", [])):
            is_flag = isinstance(flag, ast.Constant) and flag.value == "-m"
            if is_flag and isinstance(name, ast.Constant) and isinstance(name.value, str):
                found[id(name)] = name.value
    return found


def _named_files(tree: ast.AST, folders: Iterable[Path], root: Path) -> set[Path]:
    """The repository's files that a string in ``tree`` names, relative to one of ``folders``: a
    folder stands for its files that are not Python modules (a module counts where it is
    imported), and a ``python -m`` name is a module, not a path."""
    modules = _run_as_main(tree)
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            continue
        if id(node) in modules or not PATH_LIKE.fullmatch(node.value) or node.value in (".", ".."):
            continue
        for folder in folders:
            path = Path(os.path.normpath(folder / node.value))
            if os.path.exists(path) and _is_input(path, root):
                found |= {path} if path.is_file() else set(_files_in(path, root))
    return found


def _is_input(path: Path, root: Path) -> bool:
    """Whether ``path`` is in the repository at ``root`` and outside :data:`NOT_INPUTS`."""
    return path.is_relative_to(root) and not NOT_INPUTS & set(path.relative_to(root).parts)


def _files_in(folder: Path, root: Path) -> list[Path]:
    """The files under ``folder`` that are inputs and not Python modules, nor in a hidden folder
    or a package's build output below it (a tool's cache changes whenever the tool runs)."""
    found = []
    for path in folder.rglob("*"):
        below = path.relative_to(folder).parts[:-1]
        tools = any(part.startswith(".") or part.endswith(BUILT) or part in BUILT for part in below)
        if path.is_file() and path.suffix != ".py" and not tools and _is_input(path, root):
            found.append(path)
    return found


class Inputs:
    """Files and top-level packages that some code reads, grown by :meth:`add_code`."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.files: set[Path] = set()
        self.packages: set[str] = set()
        self._modules: set[str] = set()

    def add_code(self, code: str, folder: Path) -> Inputs:
        """Add what ``code`` (a guide's cells, run in ``folder``) reads, transitively."""
        self._add_reads(*_reads(ast.parse(code), "", (folder.resolve(), self.root)))
        return self

    def add_module(self, name: str) -> Inputs:
        """Add module ``name`` and what it reads, transitively."""
        return self.add_code(f"import {name}", self.root)

    def _add_reads(self, modules: frozenset[str], files: frozenset[Path]) -> None:
        self.files |= files
        for name in modules:
            parts = name.split(".")
            for end in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
                self._add_module(".".join(parts[:end]))

    def _add_module(self, name: str) -> None:
        if name in self._modules:
            return
        self._modules.add(name)
        path = module_file(name, self.root)
        if path is None:
            if module_file(name.partition(".")[0], self.root) is None:
                self.packages.add(name.partition(".")[0])
            return
        self.files.add(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        self._add_reads(*_module_reads(path.read_bytes(), path, package, self.root))

    def versions(self) -> dict[str, str]:
        """Each file's content hash by its path in the repository, each installed distribution
        the packages need by ``package:NAME``, and Python's version: what the digest covers."""
        files = {
            path.relative_to(self.root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(self.files)
        }
        packages = {
            f"package:{name}": version for name, version in distributions(frozenset(self.packages))
        }
        return {"python": sys.version.split()[0], **files, **packages}

    def digest(self) -> str:
        """One hash of :meth:`versions`: equal digests, equal inputs."""
        return versions_digest(self.versions())


def versions_digest(versions: Mapping[str, str]) -> str:
    """One hash of what :meth:`Inputs.versions` gives."""
    return hashlib.sha256(repr(sorted(versions.items())).encode()).hexdigest()


@cache
def _module_reads(source: bytes, path: Path, package: str, root: Path) -> Reads:
    """:func:`_reads` of a module's ``source``, parsed again only when the text changes."""
    return _reads(ast.parse(source), package, (path.parent, root))


def _reads(tree: ast.AST, package: str, folders: tuple[Path, Path]) -> Reads:
    """The modules ``tree`` imports and the files it names (``folders[1]`` is the repository)."""
    return frozenset(_imported(tree, package)), frozenset(_named_files(tree, folders, folders[1]))


def distributions(packages: frozenset[str]) -> list[tuple[str, str]]:
    """``(name, version)`` of the installed distributions that provide the top-level
    ``packages``, and of those they require, transitively; extras are left out."""
    pending = [name for package in packages for name in _provided().get(package, [])]
    found: dict[str, str] = {}
    while pending:
        name = re.sub(r"[-_.]+", "-", pending.pop()).lower()  # as PEP 503 compares names
        if name not in found and (installed := _installed(name)) is not None:
            found[name], requirements = installed
            pending += requirements
    return sorted(found.items())


@cache
def _installed(name: str) -> tuple[str, list[str]] | None:
    """Distribution ``name``'s version and the names it requires (extras left out), or ``None``
    where it is not installed (an optional requirement)."""
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    requirements = importlib.metadata.requires(name) or []
    needed = [r for r in requirements if "extra ==" not in r.partition(";")[2]]
    return version, [re.split(r"[^\w.-]", requirement, maxsplit=1)[0] for requirement in needed]


@cache
def _provided() -> Mapping[str, list[str]]:
    """The installed distributions by the top-level packages they provide (slow: read once)."""
    return importlib.metadata.packages_distributions()
