"""Which parameter a weight-gradient dot differentiates, and what a dot computes, as far as a
module tells: followed through calls, loops (stacked layers, gradient accumulation) and slices."""

from __future__ import annotations

import functools

from find_barriers.loops import loop_parts, state_element
from find_barriers.program import Instruction, Program, behind, callees, passes_on, tuple_index
from find_barriers.shapes import array_shapes, has_dims


def role(op_name: str | None, parameter: str | None, output: int | str | None) -> str:
    """What the dot computes: the ``forward`` pass (JAX names the backward pass
    ``transpose(...)`` in ``op_name``), a ``weight gradient`` (the parameter, or an output it
    reaches, is known), an ``activation gradient``, or ``unknown`` without an ``op_name``.

    >>> role("jit(step)/jvp(bhqk,bkhd->bqhd)/dot_general", None, None)
    'forward'
    >>> role("jit(step)/transpose(jvp())/dot_general", "model.states[0][3]", None)
    'weight gradient'
    """
    if op_name is not None and "transpose(" not in op_name:
        return "forward"
    if parameter is not None or output is not None:
        return "weight gradient"
    return "unknown" if op_name is None else "activation gradient"


class Parameters:
    """Which parameter each weight-gradient dot differentiates: the dot that reads the same
    activation in the forward pass and, as its other operand, an entry parameter with the
    gradient's sizes. Named as the dump names it (``model.head.kernel.value`` under
    ``jax.jit``, ``model.states[0][32]`` under ``nnx.jit``)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.origin = functools.cache(self._origin)  # each worked out once, kept with this
        self.readers = functools.cache(self._readers)  # instance (not the class: no leak)

    def _origin(self, name: str) -> tuple[Instruction | None, bool]:
        """What made value ``name`` (None: the module does not say), and whether it was sliced on
        the way (a stacked layer's weight, read one layer at a time): followed through calls,
        loops, tuples, slices and ops that pass a value on."""
        program, sliced, seen = self.program, False, set()
        inst = program.by_name.get(name)
        while inst is not None and inst.name not in seen:
            seen.add(inst.name)
            if passes_on(inst):
                following = inst.operands[0] if inst.operands else None
            elif inst.opcode == "get-tuple-element":
                following = self._element(inst.operands[0], tuple_index(inst), sliced)
            elif inst.opcode == "dynamic-slice" or self._slices(inst):
                following, sliced = inst.operands[0], True
            elif inst.opcode == "transpose" and sliced:  # a stack laid out layer axis first
                following = inst.operands[0]
            elif inst.opcode == "parameter":
                following = self._argument(inst)
            else:
                following = None
            if following is None:
                return inst, sliced
            inst = program.by_name.get(following)
        return None, sliced

    def _argument(self, parameter: Instruction) -> str | None:
        """The caller's operand behind a called computation's ``parameter``, where one ``call``
        calls it; None for the entry's parameters and every other case."""
        program = self.program
        comp = program.owner.get(parameter.name, program.entry)
        callers = program.callers_of(comp) if comp != program.entry else []
        index = int(parameter.operands[0]) if parameter.operands[0].isdigit() else -1
        if len(callers) != 1 or callers[0][1].opcode != "call":
            return None
        operands = callers[0][1].operands
        return operands[index] if 0 <= index < len(operands) else None

    def _element(self, name: str, index: int, sliced: bool = False) -> str | None:
        """The value that element ``index`` of tuple ``name`` holds, where the module says: a
        ``tuple``'s operand; for a loop's state or result, the value the loop started with, if
        its body passes that element on unchanged; and, read one slice at a time (``sliced``),
        the value a loop stacks into that element each trip (a scan's saved residuals)."""
        program = self.program
        inst = program.by_name.get(name)
        if inst is None:
            return None
        if inst.opcode == "tuple":
            return inst.operands[index] if index < len(inst.operands) else None
        loop = self._loop(inst)
        if loop is None or not loop.operands:
            return None
        body = loop_parts(loop).get("body", "")
        step = program.by_name.get(program.roots.get(body, ""))
        if step is None or step.opcode != "tuple" or index >= len(step.operands):
            return None
        passed = behind(step.operands[index], self.program.by_name)
        if self._is_state(passed, body, index):
            return self._element(loop.operands[0], index, sliced)
        if sliced and inst.opcode == "while" and passed is not None:
            return self._stacked(passed, body, index)
        return None

    def _is_state(self, inst: Instruction | None, body: str, index: int) -> bool:
        """Whether ``inst`` is element ``index`` of loop body ``body``'s own state."""
        element = state_element(inst, self.program.by_name)
        return inst is not None and element == index and self.program.owner.get(inst.name) == body

    def _stacked(self, update: Instruction, body: str, index: int) -> str | None:
        """The value ``update`` writes into element ``index`` of its loop's state, where it is a
        dynamic update of that element (or a call of one, as ``dynamic_update_index_in_dim``)."""
        writes = update.opcode == "dynamic-update-slice"
        if not (writes or (update.opcode == "call" and self._updates(update))):
            return None
        stack, value = update.operands[:2]
        return value if self._is_state(behind(stack, self.program.by_name), body, index) else None

    def _updates(self, call: Instruction) -> bool:
        """Whether ``call`` returns its first argument with its second written into it."""
        (callee,) = callees(call)[:1] or ("",)
        result = behind(self.program.roots.get(callee, ""), self.program.by_name)
        if result is None or result.opcode != "dynamic-update-slice":
            return False
        stack, value = (behind(name, self.program.by_name) for name in result.operands[:2])
        arguments = (self.program.parameter(callee, 0), self.program.parameter(callee, 1))
        return (stack and stack.name, value and value.name) == arguments

    def _loop(self, inst: Instruction) -> Instruction | None:
        """The ``while`` whose result ``inst`` is, or whose body or condition takes it as state."""
        if inst.opcode == "while":
            return inst
        if inst.opcode != "parameter":
            return None
        callers = self.program.callers_of(self.program.owner.get(inst.name, ""))
        loops = [caller for _, caller in callers if caller.opcode == "while"]
        return loops[0] if len(loops) == 1 else None

    def _slices(self, inst: Instruction) -> bool:
        """Whether ``inst`` calls a computation that returns a dynamic slice of its first
        argument (JAX's ``dynamic_index_in_dim``, how a scan reads one layer's weights)."""
        if inst.opcode != "call":
            return False
        (callee,) = callees(inst)[:1] or ("",)
        result = behind(self.program.roots.get(callee, ""), self.program.by_name)
        if result is None or result.opcode != "dynamic-slice":
            return False
        sliced = self.program.by_name.get(result.operands[0])
        return sliced is not None and sliced.name == self.program.parameter(callee, 0)

    def _readers(self, value: Instruction) -> list[tuple[Instruction, int]]:
        """The dots that read ``value``, via pass-on ops and calls, each with its operand index."""
        program, found, pending, seen = self.program, [], [value.name], {value.name}
        while pending:
            for user, index in program.users(pending.pop()):
                if user.opcode == "dot":
                    found.append((user, index))
                    continue
                callee = callees(user) if user.opcode == "call" else None
                name = program.parameter(callee[0], index) if callee else None
                name = name or (user.name if passes_on(user) else None)
                if name is not None and name not in seen:
                    seen.add(name)
                    pending.append(name)
        return found

    def of(self, dot: Instruction, sizes: tuple[int, ...]) -> str | None:
        """The parameter whose gradient ``dot`` makes (of sizes ``sizes`` in any order: a
        transposed kernel has the same), else None."""
        if tuple(sorted(sizes)) not in self._input_sizes:
            return None  # no input of the step has them: an activation's gradient, at once
        for operand in dot.operands[:2]:
            activation, _ = self.origin(operand)
            for forward, index in self.readers(activation) if activation else []:
                if forward is dot:
                    continue
                weight, stacked = self.origin(forward.operands[1 - index])
                if weight is not None and self._is_weight(weight, sizes, stacked):
                    return self.program.op_name(weight) or weight.name
        return None

    @functools.cached_property
    def _input_sizes(self) -> set[tuple[int, ...]]:
        """Each step input's sizes, sorted, whole and with any one dimension left out (a stack)."""
        found: set[tuple[int, ...]] = set()
        program, index = self.program, 0
        while (name := program.parameter(program.entry, index)) is not None:
            for _, dims in array_shapes(program.by_name[name].shape):
                found.add(tuple(sorted(dims)))
                found |= {tuple(sorted(dims[:i] + dims[i + 1 :])) for i in range(len(dims))}
            index += 1
        return found

    def _is_weight(self, inst: Instruction, sizes: tuple[int, ...], stacked: bool) -> bool:
        """Whether ``inst`` is a step input of ``sizes`` (or, if ``stacked``, a stack of them)."""
        return (
            self.program.owner.get(inst.name) == self.program.entry
            and inst.opcode == "parameter"
            and (has_dims(inst, sizes) or (stacked and has_dims(inst, sizes, stacked=True)))
        )
