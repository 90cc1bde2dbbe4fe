"""XLA's per-pass dumps (``xla_dump_hlo_pass_re``): their names say where each pass runs, and
which module the first algebraic simplifier received and returned."""

from __future__ import annotations

import re
from typing import TypedDict

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
