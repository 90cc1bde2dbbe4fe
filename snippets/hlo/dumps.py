"""XLA's dumps: what ``find-barriers`` reads (HLO text files, or every ``before_optimizations``
module of a dump directory, each checked to be the module JAX hands XLA; a ValueError names what
to pass instead), and the per-pass dumps' names, which say where each pass runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TypedDict

from snippets.hlo.program import Program, read_hlo

BEFORE = ".before_optimizations.txt"
HOW_TO_GET_HLO = (
    "pass HLO text: XLA's module_*.before_optimizations.txt from "
    "XLA_FLAGS='--xla_dump_to=DIR --xla_dump_hlo_as_text', or lowered.as_text(dialect=\"hlo\")"
)
_MLIR = re.compile(
    r"^\s*(module\b|func\.func\b|#loc\d* = |%\S+ = \"?(stablehlo|sdy|func)\.)", re.MULTILINE
)
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
        """The module's name in XLA's dump file name (``jit_train_step``), else the file name."""
        name = Path(self.path).name
        found = re.match(r"module_\d+\.(.+?)(?:\.before_optimizations)?\.txt$", name)
        return found[1] if found else name


def _before(path: Path) -> str:
    """The ``before_optimizations`` file to pass instead of a later dump of the same module."""
    module = re.match(r"(module_\d+\.[^.]+)\.", path.name)
    name = f"{module[1]}{BEFORE}" if module else f"module_*{BEFORE}"
    return str(path.with_name(name))


def read_file(path: str) -> Program:
    """One HLO text file, read; a ValueError says what is wrong with it and what to pass."""
    return _program(path, _text(path))


def _text(path: str) -> str:
    """A file's text; a ValueError where it is missing, a folder, a later dump, empty or binary."""
    file = Path(path)
    if not file.exists():
        raise ValueError(f"{path}: no such file")
    if file.is_dir():
        raise ValueError(f"{path}: a directory; pass the module_*.before_optimizations.txt in it")
    if _AFTER.search(file.name):
        raise ValueError(f"{path}: a module XLA has already optimised; pass {_before(file)}")
    data = file.read_bytes()
    if not data.strip():
        raise ValueError(f"{path}: the file is empty; {HOW_TO_GET_HLO}")
    try:
        text = data.decode()
    except UnicodeDecodeError:
        text = "\0"  # not text at all
    if "\0" in text:
        raise ValueError(f"{path}: a binary file (an HloProto .pb dump?); {HOW_TO_GET_HLO}")
    return text


def _program(path: str, text: str) -> Program:
    """HLO text read as a module; a ValueError where it is not the module JAX hands XLA."""
    file = Path(path)
    if _MLIR.search(text, 0, 100_000):
        raise ValueError(f"{path}: StableHLO/MLIR text, not HLO; {HOW_TO_GET_HLO}")
    if _SCHEDULED.search(text, 0, 100_000):
        raise ValueError(
            f"{path}: a compiled (scheduled) module, after XLA's passes; pass {_before(file)}"
        )
    try:
        program = read_hlo(text)
    except ValueError as error:
        raise ValueError(f"{path}: {error}; is the file cut off?") from None
    if not program.computations:
        raise ValueError(f"{path}: no HLO instruction in it; {HOW_TO_GET_HLO}")
    if text.rstrip().rsplit("\n", 1)[-1].strip() != "}":
        raise ValueError(f"{path}: cut off, it ends inside a computation; dump it again")
    if not program.entry:
        raise ValueError(f"{path}: no ENTRY computation, so no whole module; {HOW_TO_GET_HLO}")
    return program


def dump_modules(path: str, pattern: str | None = None) -> list[str]:
    """``path`` itself, or, for a directory, its ``*.before_optimizations.txt`` modules whose
    file name ``pattern`` (a regular expression) matches, in name order."""
    directory = Path(path)
    if not directory.is_dir():
        return [path]
    found = sorted(str(file) for file in directory.glob(f"*{BEFORE}"))
    matching = [file for file in found if pattern is None or re.search(pattern, Path(file).name)]
    if not matching:
        narrowed = f" whose name matches {pattern!r}" if pattern and found else ""
        raise ValueError(
            f"{path}: no *{BEFORE} module{narrowed} in it; pass the directory XLA_FLAGS="
            f"'--xla_dump_to=DIR --xla_dump_hlo_as_text' wrote, or one module_*{BEFORE}"
        )
    return matching


def read_modules(paths: Sequence[str], pattern: str | None = None) -> list[Module]:
    """Every module the paths name (files, or dump directories), each read once; a module whose
    text an earlier one already had is marked ``same_as`` it."""
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"--module {pattern!r} is not a regular expression: {error}") from None
    files = [file for path in paths for file in dump_modules(path, pattern)]
    seen: dict[bytes, str] = {}
    modules = []
    for file in dict.fromkeys(files):
        text = _text(file)
        digest = hashlib.blake2b(text.encode(), digest_size=16).digest()  # not every text kept
        first = seen.setdefault(digest, file)
        modules.append(Module(file, _program(file, text), None if first == file else first))
    return modules


_DUMP_NAME = re.compile(r"^module_\d+\.[^.]+\.(?P<index>\d{4})\.(?P<pipeline>[^.]+)\.after_(?P<after>[^.]+)\.before_(?P<before>[^.]+)\.txt$")  # fmt: skip


def parse_dump_name(name: str) -> tuple[int, str, str, str] | None:
    """``(index, pipeline, pass run, pass next)`` of a per-pass dump's file name, else None: the
    file holds the module after the first pass and before the second.

    >>> parse_dump_name("module_0001.jit_f.0010.simplification.after_dce.before_algsimp.txt")
    (10, 'simplification', 'dce', 'algsimp')
    """
    match = _DUMP_NAME.match(name)
    return (int(match[1]), match[2], match[3], match[4]) if match else None


PARTITIONER_PASSES = {
    "shardy-xla": "ShardyXLA, xla/service/spmd/shardy/shardy_xla_pass.h (CPU and GPU with Shardy)",
    "spmd-partitioning": "SpmdPartitioner's name, xla/service/spmd/spmd_partitioner.h; XLA:CPU "
    "(cpu_compiler.cc) and XLA:GPU (gpu_spmd_pipeline.cc) both add its subclass "
    "StatefulRngSpmdPartitioner",
    "xla-partitioner": "the TPU compiler's partitioner, as its dumps are quoted in MaxText's "
    "docs/guides/optimization/shard_mode_performance.md (the TPU compiler is not open source)",
}
"""Pass and pipeline names that partition a module, per backend, with where each name comes from."""


SIMPLIFIER_PASSES = {
    "algsimp": "AlgebraicSimplifier, xla/hlo/transforms/simplifiers/algebraic_simplifier.h "
    "(GpuAlgebraicSimplifier keeps the name; TPU dumps quote it too)",
}
"""Pass names of XLA's algebraic simplifier, the pass that folds ``transpose(dot)``."""


class PassOrder(TypedDict):
    """:func:`pass_order`'s answer: dump indices (None: no dump names the pass) and modules."""

    first_algsimp: int | None
    first_spmd_partitioner: int | None
    partitioner_pass: str | None
    partitioner_first: bool | None
    module_before_first_algsimp: str
    module_after_first_algsimp: str


def pass_order(dump_files: dict[str, str]) -> PassOrder:
    """Where the first algebraic simplifier and partitioner run (the first dump naming each, else
    None), and the modules that simplifier received and returned, from per-pass dumps by name."""
    dumps = sorted(
        (parsed, text) for name, text in dump_files.items() if (parsed := parse_dump_name(name))
    )
    if not dumps:
        raise ValueError("No per-pass HLO dumps found: compile with xla_dump_hlo_pass_re='.*'.")

    def first(names: dict[str, str], slots: slice = slice(3)) -> tuple[int | None, str | None, str]:
        """``(index, name, text)`` of the first dump naming one of ``names`` in ``slots``."""
        found = ((index, name, text) for (index, *passes), text in dumps for name in passes[slots])
        return next((dump for dump in found if dump[1] in names), (None, None, ""))

    algsimp, _, before = first(SIMPLIFIER_PASSES)
    partitioner, partitioner_pass, _ = first(PARTITIONER_PASSES)
    return {
        "first_algsimp": algsimp,
        "first_spmd_partitioner": partitioner,
        "partitioner_pass": partitioner_pass,
        "partitioner_first": None
        if algsimp is None or partitioner is None
        else partitioner < algsimp,
        "module_before_first_algsimp": before,
        "module_after_first_algsimp": first(SIMPLIFIER_PASSES, slice(1, 2))[2],
    }
