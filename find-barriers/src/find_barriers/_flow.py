"""Where a value goes: which of the step's outputs it reaches, through every op that carries it
(arithmetic, layout, collectives, calls, loops, conditionals, optimisation barriers), and
whether the reading could follow it all the way."""

from __future__ import annotations

import dataclasses

from find_barriers._loops import loop_parts
from find_barriers._program import SAME_VALUE, Instruction, Program, Value, callees, hands_on

_ENDS = frozenset({
    "dot", "convolution", "reduce", "reduce-window", "select-and-scatter", "gather", "compare",
    "is-finite", "iota", "rng", "rng-bit-generator", "partition-id", "replica-id", "after-all",
})  # fmt: skip
"""Ops that make a new value of the one they read (a contraction, a reduction, a comparison, a
lookup): a value stops there."""
_VALUE_OPERANDS = {
    "select": {1, 2},
    "dynamic-slice": {0},
    "dynamic-update-slice": {0, 1},
    "pad": {0},
    "scatter": {0},
}
"""Ops that carry only some of their operands: the rest are indices, a predicate, or what is
written into the first (a scatter's updates, as the lookup's gradient writes them)."""
CALLS = frozenset({"call", "manual-computation"})
"""Ops whose operands become a called computation's parameters and whose result is its root."""
_BRANCHES = frozenset({"conditional", "case"})
_ENTERED = CALLS | _BRANCHES | {"while"}
"""Ops whose operands (a branch's after the first) become a computation's parameters."""


class _Unfollowed:
    def __repr__(self) -> str:
        return "UNFOLLOWED"  # pragma: no mutate


UNFOLLOWED = _Unfollowed()
"""What :meth:`Flow.onward` gives for a use it cannot follow (an unknown custom call)."""


@dataclasses.dataclass(frozen=True)
class Reach:
    """The entry's result elements a value reaches, and whether a use was not followed."""

    outputs: frozenset[int] = frozenset()
    unfollowed: bool = False

    def __or__(self, other: Reach) -> Reach:
        return Reach(self.outputs | other.outputs, self.unfollowed or other.unfollowed)


class Flow:
    """Where the values of ``program`` go. With ``same_value``, only through ops that hand a value
    on unchanged (a layout, a ``Sharding`` call, a tuple, a call, a loop's state); else through
    every op that carries it, arithmetic included. Each value's reach is worked out once."""

    def __init__(self, program: Program, same_value: bool = False) -> None:
        self.program = program
        self.same_value = same_value
        self.reached: dict[Value, Reach] = {}
        self.passed: dict[tuple[str, int, int | None], list] = {}

    def onward(self, value: Value, within: str | None = None) -> list:
        """Where ``value`` goes next: values, the index of an entry output, or UNFOLLOWED; with
        ``within``, a computation's result goes nowhere (the call that entered it takes it)."""
        program = self.program
        name = value if isinstance(value, str) else value[0]
        comp = program.owner.get(name, "")
        found: list = []
        if program.roots.get(comp) == name and comp != within:  # a result, or its element
            found += self.exits(comp, None if isinstance(value, str) else value[1])
        for user, index in program.users(value):
            found += self.into(user, index)
        if isinstance(value, tuple):  # an element of a tuple that something reads whole
            for user, index in program.users(name):
                found += self.element_into(user, index, value[1])
        return found

    def into(self, user: Instruction, index: int) -> list:
        """Where a value goes that ``user`` reads as operand ``index``."""
        opcode = user.opcode
        if opcode in ("get-tuple-element", "opt-barrier"):
            return [user.name]
        if opcode == "tuple":
            return [(user.name, index)]
        if opcode in _ENTERED:  # a branch's operand 0, its index or predicate, enters none
            return self.entered(user, index, None)
        if opcode == "custom-call":
            if not hands_on(user):
                return [UNFOLLOWED]
            return [(user.name, index) if user.shape.startswith("(") else user.name]
        if self.same_value:
            return [user.name] if opcode in SAME_VALUE else []
        if user.shape.startswith("("):  # a combined collective: one element per operand
            return [(user.name, index)]
        if opcode in _ENDS or index not in _VALUE_OPERANDS.get(opcode, {index}):
            return []
        return [user.name]

    def element_into(self, user: Instruction, index: int, element: int) -> list:
        """Where element ``element`` of a tuple goes that ``user`` reads whole as operand
        ``index``: into a loop's state, a call's or branch's parameter, or a barrier's result."""
        if user.opcode == "opt-barrier":
            return [(user.name, element)]
        if user.opcode in _ENTERED:
            return self.entered(user, index, element)
        if user.opcode in {"tuple", "custom-call"}:
            return [UNFOLLOWED]
        return []  # a get-tuple-element of another element, or the root: found elsewhere

    def entered(self, user: Instruction, index: int, element: int | None) -> list:
        """The parameter (or its element) operand ``index`` of a loop or branch becomes; for a
        call, the parts of its result that parameter reaches (a computation several calls share
        gives each call back only what went in there)."""
        called = callees(user)
        if user.opcode in CALLS and len(called) == 1:
            return self.passed_through(user, called[0], index, element)
        if user.opcode == "while":
            called = [loop_parts(user).get("body", "")]
        elif user.opcode in _BRANCHES:
            called, index = called[index - 1 : index], 0
        elif len(called) != 1:
            return [UNFOLLOWED]
        found: list = []
        for comp in called:
            parameter = self.program.parameter(comp, index)
            if parameter is None:
                return [UNFOLLOWED]
            found.append(parameter if element is None else (parameter, element))
        return found

    def passed_through(self, call: Instruction, callee: str, index: int, element: int | None):
        """The parts of ``call``'s result that its operand ``index`` (or that operand's element
        ``element``) reaches inside ``callee``, each worked out once."""
        key = (call.name, index, element)
        parameter = self.program.parameter(callee, index)
        if parameter is None:
            return [UNFOLLOWED]
        if key not in self.passed:
            self.passed[key] = found = list[object]()
            start: Value = parameter if element is None else (parameter, element)
            pending, seen = [start], {start}
            while pending:
                value = pending.pop()
                if isinstance(value, str) and self.program.roots.get(callee) == value:
                    found.append(call.name)
                elif isinstance(value, tuple) and self.program.roots.get(callee) == value[0]:
                    found.append((call.name, value[1]))
                for after in self.onward(value, within=callee):
                    if not _is_value(after):
                        found.append(after)
                    elif after not in seen:
                        seen.add(after)
                        pending.append(after)
        return self.passed[key]

    def exits(self, comp: str, element: int | None) -> list:
        """Where a computation's result (or its element ``element``) goes: the entry's is the
        step's output; a loop body's, call's or branch's is its caller's result."""
        program = self.program
        if comp == program.entry:
            return [element or 0]
        found: list = []
        for _, caller in program.callers_of(comp):  # a value made inside: each call's result
            body = caller.opcode == "while" and loop_parts(caller).get("body") == comp
            if body or caller.opcode in CALLS or caller.opcode in _BRANCHES:
                found.append(caller.name if element is None else (caller.name, element))
            elif caller.opcode == "custom-call":
                found.append(UNFOLLOWED)
        return found  # a loop's condition and a reduction's computation give nothing on

    def reach(self, start: Value) -> Reach:
        """What ``start`` reaches: depth first, a value done once all after it are."""
        pending, waiting = [(start, False)], dict[Value, list]()
        while pending:
            value, done = pending.pop()
            if done:
                after = waiting.pop(value)
                total = Reach(
                    frozenset(n for n in after if isinstance(n, int)), UNFOLLOWED in after
                )
                for item in after:  # an output or UNFOLLOWED is no value: reached has none
                    total |= self.reached.get(item, Reach())  # none yet: a loop back to it
                self.reached[value] = total
            elif value not in self.reached and value not in waiting:
                waiting[value] = after = self.onward(value)
                pending += [(value, True), *((n, False) for n in after if _is_value(n))]
        return self.reached[start]

    def dots_reading(self, value: Value) -> list[tuple[Instruction, int]]:
        """The dots that read ``value`` through ops that hand it on, each with its operand: in the
        computations it is passed to, too."""
        found, pending, seen = [], [value], {value}
        while pending:
            current = pending.pop()
            called = []
            for user, index in self.program.users(current):
                if user.opcode == "dot":
                    found.append((user, index))
                elif user.opcode in CALLS and len(callees(user)) == 1:
                    called.append(self.program.parameter(callees(user)[0], index))
            for after in [*self.onward(current), *called]:
                if _is_value(after) and after not in seen:
                    seen.add(after)
                    pending.append(after)
        return found


def _is_value(item: object) -> bool:
    """Whether an item :meth:`Flow.onward` gives is a value to follow (not an output, not
    UNFOLLOWED)."""
    return isinstance(item, (str, tuple))
