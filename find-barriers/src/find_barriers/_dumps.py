"""XLA's dumps: what ``find-barriers`` reads (HLO text files, or every ``before_optimizations``
module of a dump directory), each checked to be the module JAX hands XLA; a ValueError names what
to pass instead of a later dump, StableHLO, a proto or a file cut off."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

from find_barriers._program import HOW_TO_GET_HLO, Program, read_hlo

BEFORE = ".before_optimizations.txt"
_SCHEDULED = re.compile(r"^HloModule [^\n]*\bis_scheduled=true", re.MULTILINE)
_AFTER = re.compile(r"[._]after_optimizations|\.\d{4}\.[^.]+\.after_[^.]+\.before_[^.]+")
"""XLA's dump names for a module after its passes, or between two of them."""


@dataclasses.dataclass(frozen=True, eq=False)
class Module:
    """One module to check: where it was read, its program, and the file of the same text
    read before it (a step compiled twice is dumped twice), if any."""

    path: str
    program: Program
    same_as: str | None = None

    @property
    def name(self) -> str:
        """XLA's name for the module (``jit_train_step``): its text's, else its file's."""
        return self.program.name or module_name(self.path)


def module_name(path: str) -> str:
    """XLA's name for the module a dump file holds (``jit_train_step``), else the file's name.

    >>> module_name("dump/module_0062.jit_train_step.before_optimizations.txt")
    'jit_train_step'
    """
    name = Path(path).name
    found = re.match(r"module_\d+\.(.+?)(?:\.before_optimizations)?\.txt$", name)
    return found[1] if found else name


def _before(path: Path) -> str:
    """The ``before_optimizations`` file to pass instead of a later dump of the same module."""
    module = re.match(r"(module_\d+\.[^.]+)\.", path.name)
    name = f"{module[1]}{BEFORE}" if module else f"module_*{BEFORE}"  # pragma: no mutate
    return str(path.with_name(name))


def read_module(path: str) -> Module:
    """One HLO text file, read; a ValueError says what is wrong with it and what to pass."""
    return Module(path, _program(path, _text(path)))


def _text(path: str) -> str:
    """A file's text; a ValueError where it is missing, a folder, unreadable, a later dump, empty
    or binary."""
    file = Path(path)
    if not file.exists():
        raise ValueError(f"{path}: no such file")
    if file.is_dir():
        raise ValueError(f"{path}: a directory; pass the module_*.before_optimizations.txt in it")
    if _AFTER.search(file.name):
        raise ValueError(f"{path}: a module XLA has already optimised; pass {_before(file)}")
    try:
        data = file.read_bytes()
    except PermissionError:
        raise ValueError(f"{path}: permission denied; make it readable") from None
    if not data.strip():
        raise ValueError(f"{path}: the file is empty; {HOW_TO_GET_HLO}")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = "\0"  # not text at all
    if "\0" in text:
        raise ValueError(f"{path}: a binary file (an HloProto .pb dump?); {HOW_TO_GET_HLO}")
    return text


def _program(path: str, text: str, path_map: Sequence[tuple[str, str]] = ()) -> Program:
    """HLO text read as a module (its recorded paths mapped by ``path_map``, as
    :func:`~find_barriers.read_hlo` does); a ValueError where it is not the module JAX
    hands XLA."""
    if _SCHEDULED.search(text, 0, 100_000):
        raise ValueError(
            f"{path}: a compiled (scheduled) module, after XLA's passes; pass {_before(Path(path))}"
        )
    try:
        program = read_hlo(text, path_map)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    if not program.computations:
        raise ValueError(f"{path}: no HLO instruction in it; {HOW_TO_GET_HLO}")
    if text.rstrip().rpartition("\n")[2].strip() != "}":
        raise ValueError(f"{path}: cut off, it ends inside a computation; dump it again")
    if not program.entry:
        raise ValueError(f"{path}: no ENTRY computation, so no whole module; {HOW_TO_GET_HLO}")
    return program


def dump_modules(path: str, pattern: str | None = None) -> list[str]:
    """``path`` itself, or, for a directory, its ``*.before_optimizations.txt`` modules whose
    name (:func:`module_name`) ``pattern``, a regular expression, matches, in name order."""
    directory = Path(path)
    if not directory.is_dir():
        return [path]
    try:
        found = sorted(str(file) for file in directory.glob(f"*{BEFORE}"))
        next(directory.iterdir(), None)  # glob is silent about a folder it cannot list
    except PermissionError:
        raise ValueError(f"{path}: permission denied; make the directory readable") from None
    matching = [file for file in found if pattern is None or re.search(pattern, module_name(file))]
    if not matching:
        narrowed = f" whose name matches {pattern!r}" if pattern and found else ""
        raise ValueError(
            f"{path}: no *{BEFORE} module{narrowed} in it; pass the directory XLA_FLAGS="
            f"'--xla_dump_to=DIR --xla_dump_hlo_as_text' wrote, or one module_*{BEFORE}"
        )
    return matching


def read_modules(
    paths: Sequence[str], pattern: str | None = None, path_map: Sequence[tuple[str, str]] = ()
) -> list[Module]:
    """Every module the paths name (files, or dump directories) whose name ``pattern`` matches,
    each read once, its recorded paths mapped by ``path_map``; a module whose text an earlier one
    already had is marked ``same_as`` it. A ValueError where ``pattern`` matches none."""
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"--module {pattern!r} is not a regular expression: {error}") from None
    files = [file for path in paths for file in dump_modules(path, pattern)]
    seen: dict[bytes, str] = {}
    modules, names = [], set()
    for file in dict.fromkeys(files):
        text = _text(file)
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()  # not every text kept
        first = seen.setdefault(digest, file)
        module = Module(file, _program(file, text, path_map), None if first == file else first)
        names.add(module.name)
        if pattern is None or re.search(pattern, module.name):
            modules.append(module)
    if not modules:
        every = ", ".join(sorted(names))  # pragma: no mutate
        raise ValueError(f"--module {pattern!r} matches no module's name (the modules: {every})")
    return modules
