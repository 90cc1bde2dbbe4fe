"""Counts a guide reports: opcodes, ``Sharding`` calls, the kernel's sites, relayouts, kernel-order
dots, dot FLOPs."""

from __future__ import annotations

import math

from find_barriers import (
    Instruction,
    TransposeSite,
    array_shapes,
    attribute_dims,
    elements,
    find_sites,
    instructions,
    is_sharding_call,
    read_hlo,
)
from snippets.hlo.layouts import has_dims, layout


def kernel_sites(hlo_text: str, dims: tuple[int, ...]) -> list[TransposeSite]:
    """find-barriers' sites of a module whose transpose has the kernel's sizes ``dims``."""
    return [
        site
        for site in find_sites(read_hlo(hlo_text))
        if sorted(array_shapes(site.shape)[0][1]) == sorted(dims)
    ]


def opcode_counts(hlo_text: str, *opcodes: str) -> dict[str, int]:
    """How many instructions of each named opcode the module has."""
    found = [inst.opcode for inst in instructions(hlo_text)]
    return {opcode: found.count(opcode) for opcode in opcodes}


def sharding_call_count(hlo_text: str) -> int:
    """How many ``Sharding`` custom calls the module has (zero once XLA has partitioned it)."""
    return sum(is_sharding_call(inst) for inst in instructions(hlo_text))


def relayouts(hlo_text: str, dims: tuple[int, ...] | None = None) -> list[Instruction]:
    """The transposes and copies of a module; ``dims`` keeps those of that size set."""
    return [
        inst
        for inst in instructions(hlo_text)
        if inst.opcode in ("transpose", "copy") and has_dims(inst, dims)
    ]


def kernel_order_dots(hlo_text: str, dims: tuple[int, ...]) -> list[Instruction]:
    """The dots that write an array of exactly ``dims`` in row-major order: a gradient in kernel order."""
    return [
        inst
        for inst in instructions(hlo_text)
        if inst.opcode == "dot"
        and array_shapes(inst.shape)[0][1] == tuple(dims)
        and layout(inst.shape) in (None, tuple(reversed(range(len(dims)))))
    ]


def dot_flops(hlo_text: str) -> int:
    """Per-device FLOPs of a compiled module's dots: 2 x result elements x contracted size."""
    found = instructions(hlo_text)
    shapes = {inst.name: inst.shape for inst in found}  # names are unique in a module
    total = 0
    for dot in (inst for inst in found if inst.opcode == "dot"):
        lhs = array_shapes(shapes[dot.operands[0]])[0][1]
        contracted = attribute_dims(dot.attributes, "lhs_contracting_dims")
        total += 2 * elements(dot.shape) * math.prod(lhs[d] for d in contracted)
    return total
