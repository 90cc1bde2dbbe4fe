"""Would XLA fold this transpose into its dot? The algebraic simplifier's conditions, as a function.

XLA's ``AlgebraicSimplifier`` rewrites ``transpose(dot(a, b))`` as ``dot(b, a)`` only when
([``HandleTranspose``][algsimp], its ``do_transpose_of_dot`` branch, the one XLA:CPU takes: it
turns ``supports_non_canonical_dots`` off, [cpu_compiler.cc][options]):

- the transpose's operand is the dot itself, and the dot has no other user;
- the dot is canonical: each operand has exactly one non-contracting dimension, besides batch
  dimensions and at least one contracting dimension;
- the transpose swaps the last two dimensions and keeps the rest in place.

XLA:CPU runs ``DotDecomposer`` before it ([pipeline][cpu]), which makes batch dimensions lead and
merges the contracting dimensions into one, of size 1 where there were none
([``DotDecomposer::Run``][decomposer]); a dot with more than one non-contracting dimension per side
it reshapes, so a reshape then stands between. So only the count of non-contracting dimensions
decides. :func:`no_fold` asks these conditions of a site as if the ``Sharding`` calls between were
gone, and says which one fails.

[algsimp]: https://github.com/openxla/xla/blob/11c07836fbe9b0f746484d008242ddaee7e9005b/xla/hlo/transforms/simplifiers/algebraic_simplifier.cc#L8824-L8881
[options]: https://github.com/openxla/xla/blob/11c07836fbe9b0f746484d008242ddaee7e9005b/xla/service/cpu/cpu_compiler.cc#L683-L690
[cpu]: https://github.com/openxla/xla/blob/11c07836fbe9b0f746484d008242ddaee7e9005b/xla/service/cpu/cpu_compiler.cc#L550-L552
[decomposer]: https://github.com/openxla/xla/blob/11c07836fbe9b0f746484d008242ddaee7e9005b/xla/hlo/transforms/expanders/dot_decomposer.cc#L274-L311
"""

from __future__ import annotations

from collections.abc import Sequence

from find_barriers._program import Instruction, Program, attribute_dims, is_sharding_call
from find_barriers._shapes import array_shapes

_REMOVED = {"copy", "bitcast", "get-tuple-element", "tuple"}
"""Ops between that change nothing XLA's simplifier looks at (a copy before layout assignment,
a tuple element it forwards)."""


def no_fold(
    program: Program, transpose: Instruction, chain: Sequence[Instruction], dot: Instruction
) -> str | None:
    """Why XLA's simplifier would keep ``transpose`` even with no ``Sharding`` call in ``chain``
    (the ops between, nearest the transpose first); ``None`` when it would fold it."""
    if changed := [op.opcode for op in chain if op.opcode not in _REMOVED | {"custom-call"}]:
        article = "an" if changed[0][0] in "aeiou" else "a"  # pragma: no mutate
        return (
            f"{article} {changed[0]} stands between: the transpose does not read the dot's result"
        )
    if others := [op for op in chain if op.opcode == "custom-call" and not is_sharding_call(op)]:
        return f"a custom call stands between: {others[0].attributes[:60]}"  # pragma: no mutate
    for side, operand in zip(("lhs", "rhs"), dot.operands, strict=False):
        if (free := _free(program, dot, side, operand)) not in (None, 1):
            return f"the dot's {side} has {free} non-contracting dimensions, not one"
    order = attribute_dims(transpose.attributes, "dimensions")
    swap = (*range(len(order) - 2), len(order) - 1, len(order) - 2)
    if order != swap:
        shown = ",".join(map(str, order))
        return f"the transpose moves more than the last two dimensions ({{{shown}}})"
    return _shared(program, chain, dot)


def _shared(program: Program, chain: Sequence[Instruction], dot: Instruction) -> str | None:
    """Which of the dot and the ops between has another user, as :func:`no_fold` says it."""
    held = {dot.name, *(op.name for op in chain)}
    for value in (dot, *chain):  # with the calls gone, the dot's users are all of these
        users = len(program.users(value.name))  # a tuple's: those that read it whole
        if value.opcode == "tuple":  # and those that get an element holding the dot's value
            elements = [i for i, name in enumerate(value.operands) if name in held]
            users += sum(len(program.users((value.name, i))) for i in elements)
        if users > 1:
            return f"the {value.opcode} has {users} users"  # pragma: no mutate
    return None


def free_dims(program: Program, dot: Instruction) -> tuple[int, int] | None:
    """How many non-contracting dimensions each of the dot's operands has, lhs first; None where
    the dot has batch dimensions or an operand's rank is unknown."""
    sides = list(zip(("lhs", "rhs"), dot.operands, strict=False))
    if any(attribute_dims(dot.attributes, f"{side}_batch_dims") for side, _ in sides):
        return None
    match [_free(program, dot, side, operand) for side, operand in sides]:
        case [int(lhs), int(rhs)]:
            return lhs, rhs
    return None


def _free(program: Program, dot: Instruction, side: str, operand: str) -> int | None:
    """How many dimensions of the dot's ``side`` operand are neither contracting nor batch; None
    where the module does not hold it as one array (its rank unknown)."""
    inst = program.by_name.get(operand)
    arrays = array_shapes(inst.shape) if inst else []
    if len(arrays) != 1:
        return None
    taken = (
        attribute_dims(dot.attributes, f"{side}_{kind}_dims") for kind in ("contracting", "batch")
    )
    return len(arrays[0][1]) - sum(map(len, taken))


def swaps_wide_operands(
    program: Program, transpose: Instruction, chain: Sequence[Instruction], dot: Instruction
) -> bool:
    """Whether ``transpose`` only puts the dot's rhs dimensions before its lhs ones, the dot
    having no batch dimensions and an operand more than one non-contracting dimension: the
    ``dot(b, a)`` XLA's simplifier will not make, as :func:`no_fold` says, though nothing else
    stands in the way (only ``Sharding`` calls and ops that change nothing between, no other
    user)."""
    counts = free_dims(program, dot)
    if counts is None or max(counts) < 2:
        return False
    if any(op.opcode not in _REMOVED and not is_sharding_call(op) for op in chain):
        return False
    lhs, rhs = counts
    swapped = (*range(lhs, lhs + rhs), *range(lhs))
    order = attribute_dims(transpose.attributes, "dimensions")
    return order == swapped and _shared(program, chain, dot) is None
