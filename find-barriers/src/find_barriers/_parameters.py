"""Which parameter a weight-gradient dot differentiates, and what a dot computes, as far as a
module tells: followed through calls, loops (stacked layers, gradient accumulation) and slices."""

from __future__ import annotations

import functools

from find_barriers._flow import CALLS, Flow, Reach
from find_barriers._loops import loop_parts, state_element
from find_barriers._phases import BACKWARD, FORWARD
from find_barriers._program import (
    Instruction,
    Program,
    behind,
    callees,
    hands_on,
    passes_on,
    tuple_index,
)
from find_barriers._shapes import array_shapes, elements_of
from find_barriers._vocabulary import Role


def role(phase: str | None, parameter: str | None, reach: Reach) -> Role:
    """What a dot computes, by where its value goes: the ``forward`` pass (recomputed or not); a
    ``weight gradient`` when its value reaches an output of the step (a parameter's gradient,
    update or moments) or a forward dot shows whose gradient it is; an ``activation gradient``
    when every use was followed and none reaches an output; else ``unknown``.

    >>> str(role("backward", None, Reach(frozenset({3}))))
    'weight gradient'
    >>> [str(role("backward", None, reach)) for reach in (Reach(), Reach(unfollowed=True))]
    ['activation gradient', 'unknown']
    """
    if phase == FORWARD:
        return Role.FORWARD
    if reach.outputs or parameter is not None:
        return Role.WEIGHT_GRADIENT
    if phase == BACKWARD and not reach.unfollowed:
        return Role.ACTIVATION_GRADIENT
    return Role.UNKNOWN


class Parameters:
    """Which parameter each weight-gradient dot differentiates: the dot that reads the same
    activation in the forward pass, and as its other operand a value of the gradient's sizes that
    comes from an entry parameter. Named as the dump names it (``params['head']['kernel']`` under
    ``jax.jit``, ``model.states[0][32]``, a position, under ``nnx.jit``)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.flow = Flow(program, same_value=True)
        self.origin = functools.cache(self._origin)  # each worked out once, kept with this
        self.readers = functools.cache(self.flow.dots_reading)  # instance (not the class)

    def _origin(self, name: str, weight: bool = False) -> tuple[Instruction | None, bool]:
        """What made value ``name`` (None: the module does not say), and whether it was sliced on
        the way (a stacked layer's weight, read one layer at a time): followed through calls,
        loops, tuples, barriers, slices and ops that pass a value on; for a ``weight``, through
        transposes too (a tied table is read transposed)."""
        program, sliced, seen = self.program, False, set()
        inst = program.by_name.get(name)
        while inst is not None and inst.name not in seen:
            seen.add(inst.name)
            if passes_on(inst) or (hands_on(inst) and len(inst.operands) == 1):
                following = inst.operands[0] if inst.operands else None
            elif inst.opcode == "get-tuple-element":
                following = self._element(inst.operands[0], tuple_index(inst), sliced)
            elif inst.opcode == "dynamic-slice" or self._slices(inst):
                following, sliced = inst.operands[0], True
            elif _reorders(inst, program, transposes=sliced or weight):
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
        """The caller's operand behind a called computation's ``parameter``, where one call calls
        it; None for the entry's parameters and every other case."""
        program = self.program
        comp = program.owner.get(parameter.name, program.entry)
        callers = program.callers_of(comp) if comp != program.entry else []
        index = int(parameter.operands[0])  # read_hlo refuses a parameter with no number
        if len(callers) != 1 or callers[0][1].opcode not in CALLS:
            return None
        operands = callers[0][1].operands
        return operands[index] if 0 <= index < len(operands) else None

    def _element(self, name: str, index: int, sliced: bool) -> str | None:
        """The value that element ``index`` of tuple ``name`` holds, where the module says: a
        ``tuple``'s operand, an optimisation barrier's, a passing custom call's or a call's; for a
        loop's state or result, the value the loop started with, if its body passes that element on
        unchanged; and, read one slice at a time (``sliced``), the value a loop stacks into that
        element each trip (a scan's saved residuals)."""
        program = self.program
        inst = program.by_name.get(name)
        if inst is None:
            return None
        if inst.opcode == "tuple" or hands_on(inst):
            return inst.operands[index] if index < len(inst.operands) else None
        if inst.opcode == "opt-barrier" and len(inst.operands) == 1:
            return self._element(inst.operands[0], index, sliced)
        if inst.opcode in CALLS and len(called := callees(inst)) == 1:  # the callee's result
            root = program.by_name.get(program.roots.get(called[0], ""))
            return root.operands[index] if root and root.opcode == "tuple" else None
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

    def of(self, dot: Instruction, sizes: tuple[int, ...]) -> Instruction | None:
        """The entry parameter whose gradient ``dot`` makes (of sizes ``sizes``), else None: a
        forward dot reads one of ``dot``'s operands and, as its other, a value of those sizes (in
        any order: a kernel stored transposed has the same) that comes from an entry parameter."""
        program = self.program
        for operand in dot.operands[:2]:
            activation, _ = self.origin(operand)
            for forward, index in self.readers(activation.name) if activation else []:
                read = program.by_name.get(forward.operands[1 - index])
                if forward is dot or read is None or not _same_sizes(read, sizes):
                    continue
                weight, _ = self.origin(read.name, weight=True)
                if weight is not None and self._is_entry_parameter(weight):
                    return weight
        return None

    def _is_entry_parameter(self, inst: Instruction) -> bool:
        return (
            inst.opcode == "parameter" and self.program.owner.get(inst.name) == self.program.entry
        )


def _reorders(inst: Instruction, program: Program, transposes: bool) -> bool:
    """Whether ``inst`` holds its operand's values in another order or extent: a ``transpose`` or
    an ``all-gather`` where those are followed (a stack laid out layer first, a tied table read
    transposed, a ``shard_map`` FSDP layer's gathered weight), or a ``reduce`` over dimensions
    of size 1 only (a ``shard_map`` body's one expert, summed by its einsum)."""
    if inst.opcode in ("transpose", "all-gather"):
        return transposes
    operand = program.by_name.get(inst.operands[0]) if inst.operands else None
    unit = operand is not None and elements_of(operand) == elements_of(inst) > 0
    return inst.opcode == "reduce" and unit


def _same_sizes(inst: Instruction, sizes: tuple[int, ...]) -> bool:
    """Whether ``inst``'s array has the sizes ``sizes``, in any order."""
    arrays = array_shapes(inst.shape)
    return len(arrays) == 1 and sorted(arrays[0][1]) == sorted(sizes)
