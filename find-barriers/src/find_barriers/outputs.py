"""Which element of a module's result each value reaches: a weight gradient its parameter's."""

from __future__ import annotations

from find_barriers.loops import loop_parts
from find_barriers.program import SAME_VALUE, Instruction, Program, Value, callees
from find_barriers.shapes import elements_of

_CARRIES = SAME_VALUE | {"all-reduce", "transpose", "add", "custom-call"}
"""Ops that pass a value on whole (same element count) on its way to the module's result."""


def outputs_reached(program: Program, names: list[str]) -> dict[str, int | None]:
    """For each named instruction, the element of the entry's result its value reaches, else None:
    a weight gradient reaches its parameter's output, an activation gradient none."""
    flow = _Flow(program)
    return {name: min(flow.reach(name), default=None) for name in names}


class _Flow:
    """Where the values of ``program`` go, each worked out once."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.reached: dict = {}  # value -> the outputs it reaches
        self.loops: dict[str, str | None] = {}  # computation -> the while whose body it is
        self.through: dict[tuple[str, int], bool] = {}  # (call, operand) -> reaches its root

    def loop_of(self, comp: str) -> str | None:
        """The ``while`` whose body ``comp`` is, if any."""
        if comp not in self.loops:
            loops = [i for _, i in self.program.callers_of(comp) if i.opcode == "while"]
            body = (i.name for i in loops if loop_parts(i).get("body") == comp)
            self.loops[comp] = next(body, None)
        return self.loops[comp]

    def onward(self, value: str | tuple[str, int]) -> list:
        """Where ``value`` goes next: instructions, tuple elements, or an entry output's index."""
        program = self.program
        found: list = [0] if value == program.roots.get(program.entry) else []
        for user, index in program.users(value):
            comp = program.owner[user.name]
            root = program.roots.get(comp) == user.name
            if user.opcode == "tuple" and root and comp == program.entry:
                found.append(index)
            elif user.opcode == "tuple" and root and self.loop_of(comp):
                found.append((self.loop_of(comp), index))  # the next iteration's, or the loop's
            elif user.opcode in ("tuple", "all-reduce") and len(user.operands) > 1:
                found.append((user.name, index))
            elif self.passes_whole(user, index, value):
                found.append(user.name)
        return found

    def passes_whole(self, user: Instruction, index: int, value: str | tuple[str, int]) -> bool:
        """Whether ``user`` passes operand ``index``, ``value``, on as one whole value."""
        return (
            user.opcode == "get-tuple-element"
            or (user.opcode == "dynamic-update-slice" and index == 1)
            or (user.opcode == "call" and self.passes_through(user, index))
            or (
                user.opcode in _CARRIES
                and isinstance(value, str)  # a tuple element's users are its get-tuple-elements
                and elements_of(user) == elements_of(self.program.by_name[value])
            )
        )

    def passes_through(self, call: Instruction, index: int) -> bool:
        """Whether operand ``index`` of ``call`` reaches its computation's root."""
        if (call.name, index) not in self.through:
            (callee,) = callees(call)
            pending: list = [self.program.parameter(callee, index)]  # as onward's: any value
            seen = set()
            while pending:  # within the callee only
                value = pending.pop()
                name = value[0] if isinstance(value, tuple) else value  # an int is an output
                inside = isinstance(name, str) and self.program.owner[name] == callee
                if inside and value not in seen:
                    pending += self.onward(value)
                seen.add(value)
            self.through[call.name, index] = self.program.roots.get(callee) in seen
        return self.through[call.name, index]

    def reach(self, start: str) -> set[int]:
        """The outputs ``start`` reaches: depth first, a value done once all after it are."""
        pending, waiting = [(start, False)], dict[Value, list]()
        while pending:
            value, done = pending.pop()
            if done:
                after = waiting.pop(value)
                self.reached[value] = set().union(
                    *({n} if isinstance(n, int) else self.reached.get(n, set()) for n in after)
                )
            elif value not in self.reached and value not in waiting:
                waiting[value] = after = self.onward(value)
                pending += [(value, True), *((n, False) for n in after if not isinstance(n, int))]
        return self.reached[start]
