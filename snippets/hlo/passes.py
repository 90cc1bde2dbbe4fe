"""XLA's per-pass dumps (``xla_dump_hlo_pass_re``): their names say where each pass runs, which
module the first algebraic simplifier received and returned, and what it did to each site."""

from __future__ import annotations

import re
from typing import TypedDict

from find_barriers import array_shapes, find_sites, instructions, read_hlo, value_source

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


def algsimp_fates(before: str, after: str) -> dict[str, dict]:
    """What the first ``algsimp`` did to each transpose-of-dot site of ``before`` (the module it
    received; ``after``, the one it returned), by transpose name: ``folded`` when what read the
    transpose reads a dot of the transposed shape instead, else ``after_algsimp`` says what
    happened (kept, and what stands between; its dot rewritten into another op; replaced)."""
    new = {inst.name: inst for inst in instructions(after)}
    first_user: dict[str, tuple[str, int]] = {}
    for inst in instructions(before):
        for index, operand in enumerate(inst.operands):
            first_user.setdefault(operand, (inst.name, index))
    kept = {site.transpose: site for site in find_sites(read_hlo(after))}
    fates = {}
    for site in find_sites(read_hlo(before)):
        name, replacement = site.transpose, None
        if name in kept:
            what = "kept: " + " -> ".join(["dot", *reversed(kept[name].between), "transpose"])
        elif name in new:
            origin = value_source(new[name], new)[1]
            what = f"kept; its dot became a {origin.opcode if origin else '?'}"
        else:
            while name in first_user and replacement is None:  # the first user algsimp kept
                user, index = first_user[name]
                replacement = new.get(new[user].operands[index]) if user in new else None
                name = user
            what = f"replaced by a {replacement.opcode}" if replacement else "removed"
        folded = (
            replacement is not None
            and replacement.opcode == "dot"
            and array_shapes(replacement.shape)[0][1] == array_shapes(site.shape)[0][1]
        )
        fates[site.transpose] = {
            "folded": folded,
            "after_algsimp": "folded: the dot writes the transposed shape" if folded else what,
        }
    return fates
