"""Walks back from a step's weight-gradient outputs: the relayouts and the path that make them,
and whether each relayout moves bytes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from find_barriers import (
    Instruction,
    array_shapes,
    attribute_dims,
    callees,
    elements_of,
    instructions,
    read_hlo,
    tuple_index,
)
from snippets.hlo.layouts import layout


def _called(inst: Instruction, comps: dict[str, list[Instruction]]) -> list[Instruction]:
    """The instructions of the computations ``inst`` calls, nested calls included, each once."""
    called = [] if inst.opcode in ("while", "conditional") else callees(inst)  # not control flow
    inside = [i for name in called for i in comps.get(name, [])]
    return list(dict.fromkeys(deeper for i in inside for deeper in (i, *_called(i, comps))))


def entry_at(hlo_text: str, outputs: tuple[int, ...]) -> tuple[dict, dict[str, Instruction], list]:
    """The module's computations, its entry's instructions by name, and the operands of the
    entry's root at ``outputs`` (the values a walk back starts from)."""
    program = read_hlo(hlo_text)
    by_name = {inst.name: inst for inst in program.computations.get(program.entry, [])}
    if not program.entry or (root := program.roots.get(program.entry)) not in by_name:
        raise ValueError("No entry computation with a ROOT instruction in this HLO text.")
    return program.computations, by_name, [by_name[root].operands[index] for index in outputs]


def kernel_relayouts(
    hlo_text: str, outputs: tuple[int, ...], kernel_elements: set[int]
) -> dict[Instruction, list[Instruction]]:
    """The entry's instructions between a weight-gradient dot and the root's ``outputs`` that are,
    or contain, transposes and copies, with those; walks back through operands of a size in
    ``kernel_elements``, so a same-shaped array on another path (an embedding table) stays out."""
    comps, by_name, pending = entry_at(hlo_text, outputs)
    seen: set[str] = set()
    found = {}
    while pending:
        inst = by_name.get(pending.pop())
        if inst is None or inst.name in seen:
            continue
        seen.add(inst.name)
        inside = _called(inst, comps)
        computes_dot = any(i.opcode == "dot" for i in inside)
        if computes_dot or inst.opcode in ("dot", "convolution", "parameter"):
            continue
        if moved := [i for i in (inst, *inside) if i.opcode in ("transpose", "copy")]:
            found[inst] = moved
        if inst.opcode == "get-tuple-element":
            source = by_name.get(inst.operands[0])
            if source is not None and len(source.operands) > tuple_index(inst):
                seen.add(source.name)
                pending.append(source.operands[tuple_index(inst)])
        else:
            pending += [o for o in inst.operands if elements_of(by_name.get(o)) in kernel_elements]
    return found


def moves_data(inst: Instruction, operand: Instruction) -> bool:
    """Whether a transpose or copy moves bytes, or only relabels dimensions (a bitcast in effect):
    its dimensions' order in memory, major to minor without size-1 ones, against its operand's.

    >>> a = Instruction("a", "f32[4,8]{1,0}", "parameter", ("0",), "")
    >>> moves_data(Instruction("t", "f32[8,4]{0,1}", "transpose", ("a",), ", dimensions={1,0}"), a)
    False
    >>> moves_data(Instruction("c", "f32[4,8]{0,1}", "copy", ("a",), ""), a)
    True
    """
    orders = []
    for shape in (inst.shape, operand.shape):
        if (order := layout(shape)) is None:
            return True
        sizes = array_shapes(shape)[0][1]
        orders.append([d for d in reversed(order) if sizes[d] != 1])
    result, source = orders
    if inst.opcode == "transpose":
        permutation = attribute_dims(inst.attributes, "dimensions")
        result = [permutation[d] for d in result]
    return result != source


def parameter_relayouts(compiled: str, names: Sequence[str], devices: int) -> dict[str, list[dict]]:
    """Per parameter (a step output of two or more dimensions, named in ``names``): the
    :func:`kernel_relayouts` of its gradient, sized as it or a shard on up to ``devices`` devices,
    each transpose or copy with :func:`moves_data`."""
    by_name = {inst.name: inst for inst in instructions(compiled)}
    if not (result := re.search(r"->\((.*)\)\}", compiled.splitlines()[0])):
        raise ValueError("the compiled module's layout names no tuple result")
    found = {}
    for index, (name, (_, dims)) in enumerate(zip(names, array_shapes(result[1]), strict=True)):
        if len(dims) >= 2:
            sizes = {math.prod(dims) // n for n in range(1, devices + 1)}
            found[name] = [
                {
                    "op": op.opcode,
                    "shape": op.shape,
                    "moves_data": moves_data(op, by_name[op.operands[0]]),
                }
                for ops in kernel_relayouts(compiled, (index,), sizes).values()
                for op in ops
            ]
    return found


def gradient_path(
    hlo_text: str, outputs: tuple[int, ...], kernel_elements: set[int]
) -> list[Instruction]:
    """The entry's instructions from the root's ``outputs`` back to the dots that make them, through
    operands of a size in ``kernel_elements`` (so a same-shaped array on another path, an embedding
    table, stays out); a fusion holding the dot and a whole tuple's collective included."""
    comps, by_name, pending = entry_at(hlo_text, outputs)
    seen, path = set(), []
    while pending:
        inst = by_name.get(pending.pop())
        if inst is None or inst.name in seen or inst.opcode in ("dot", "parameter"):
            continue
        seen.add(inst.name)
        path.append(inst)
        if inst.opcode == "get-tuple-element":
            pending.append(inst.operands[0])
        elif not any(i.opcode == "dot" for i in _called(inst, comps)):
            pending += [o for o in inst.operands if elements_of(by_name.get(o)) in kernel_elements]
    return path
