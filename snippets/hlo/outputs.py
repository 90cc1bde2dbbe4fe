"""Which element of a module's result each value reaches: a weight gradient its parameter's."""

from __future__ import annotations

import functools

from snippets.hlo.loops import loop_parts
from snippets.hlo.program import SAME_VALUE, Instruction, Program, callees, read_hlo
from snippets.hlo.shapes import elements_of

_CARRIES = SAME_VALUE | {"all-reduce", "transpose", "add", "custom-call"}
"""Ops that pass a value on whole (same element count) on its way to the module's result."""


def outputs_reached(hlo_text: str, names: list[str]) -> dict[str, int | None]:
    """For each named instruction, the element of the entry's result its value reaches, else None:
    a weight gradient reaches its parameter's output, an activation gradient none."""
    return outputs_reached_in(read_hlo(hlo_text), names)


def outputs_reached_in(program: Program, names: list[str]) -> dict[str, int | None]:
    """:func:`outputs_reached` on a read program; what each value reaches is worked out once."""
    by_name, owner, roots, entry = program.by_name, program.owner, program.roots, program.entry

    @functools.cache
    def loop_of(comp: str) -> str | None:
        """The ``while`` whose body ``comp`` is, if any."""
        loops = [i for _, i in program.callers_of(comp) if i.opcode == "while"]
        return next((i.name for i in loops if loop_parts(i).get("body") == comp), None)

    def onward(value: str | tuple[str, int]) -> list:
        """Where ``value`` goes next: instructions, tuple elements, or an entry output's index."""
        found: list = [0] if value == roots.get(entry) else []
        for user, index in program.users(value):
            comp = owner[user.name]
            if user.opcode == "tuple" and roots.get(comp) == user.name and comp == entry:
                found.append(index)
            elif user.opcode == "tuple" and roots.get(comp) == user.name and loop_of(comp):
                found.append((loop_of(comp), index))  # the next iteration's, or the loop's result
            elif user.opcode in ("tuple", "all-reduce") and len(user.operands) > 1:
                found.append((user.name, index))
            elif (
                user.opcode == "get-tuple-element"
                or (user.opcode == "dynamic-update-slice" and index == 1)
                or (user.opcode == "call" and passes_through(user, index))
                or (user.opcode in _CARRIES and elements_of(user) == elements_of(by_name[value]))
            ):
                found.append(user.name)
        return found

    @functools.cache
    def passes_through(call: Instruction, index: int) -> bool:
        """Whether operand ``index`` of ``call`` reaches its computation's root."""
        (callee,) = callees(call)
        pending, seen = [program.parameter(callee, index)], set()
        while pending:  # within the callee only
            value = pending.pop()
            name = value[0] if isinstance(value, tuple) else value  # an int is an output
            if value not in seen and isinstance(name, str) and owner[name] == callee:
                pending += onward(value)
            seen.add(value)
        return roots.get(callee) in seen

    reached: dict = {}  # value -> the outputs it reaches, worked out once

    def reach(start: str) -> set[int]:
        pending, waiting = [(start, False)], {}
        while pending:  # depth first; a value is done once everything after it is
            value, done = pending.pop()
            if done:
                after = waiting.pop(value)
                reached[value] = set().union(
                    *({n} if isinstance(n, int) else reached.get(n, set()) for n in after)
                )
            elif value not in reached and value not in waiting:
                waiting[value] = after = onward(value)
                pending += [(value, True), *((n, False) for n in after if not isinstance(n, int))]
        return reached[start]

    outputs = {name: reach(name) for name in names}
    return {name: min(found) if found else None for name, found in outputs.items()}
