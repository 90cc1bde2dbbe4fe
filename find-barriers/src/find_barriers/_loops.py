"""How many times each computation runs: ``while`` trip counts, and counts through calls."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import overload

from find_barriers._program import Instruction, Program, behind, tuple_index

_KNOWN_TRIPS = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
_LOOP_PARTS = re.compile(r"\b(condition|body)=%?([\w.\-]+)")


def loop_parts(loop: Instruction) -> dict[str, str]:
    """A ``while``'s ``condition`` and ``body`` computations, by those words."""
    return dict(_LOOP_PARTS.findall(loop.attributes.partition(", metadata=")[0]))


def trip_count(loop: Instruction, program: Program) -> int | None:
    """How many times a ``while`` runs its body: the ``known_trip_count`` XLA writes into its
    ``backend_config``, else, as before optimisation, read from the loop: a counter that starts at
    a constant, is compared with a constant and grows by a constant. None when neither says."""
    if known := _KNOWN_TRIPS.search(loop.attributes):
        return int(known[1])
    parts = loop_parts(loop)
    by_name, roots = program.by_name, program.roots
    compare = by_name.get(roots.get(parts.get("condition", ""), ""))
    state = by_name.get(loop.operands[0]) if loop.operands else None  # the loop's first state
    step = by_name.get(roots.get(parts.get("body", ""), ""))  # the next iteration's state
    if compare is None or compare.opcode != "compare" or state is None or step is None:
        return None
    if not (found := re.search(r"direction=(\w+)", compare.attributes)):
        return None
    direction = found[1]
    counter, bound = (behind(name, by_name) for name in compare.operands)
    if _constant(counter) is not None:  # ``bound > counter`` is ``counter < bound``
        counter, bound = bound, counter  # (``bound < counter`` is ``counter > bound``: not read)
        direction = {"GT": "LT", "GE": "LE", "NE": "NE"}.get(direction)
    index = state_element(counter, by_name)
    if index is None or index >= min(len(state.operands), len(step.operands)):
        return None
    start = _constant(behind(state.operands[index], by_name))
    grow = behind(step.operands[index], by_name)
    terms = [behind(name, by_name) for name in grow.operands] if grow else []
    reads_counter = any(state_element(term, by_name) == index for term in terms)
    stride = next((s for term in terms if (s := _constant(term)) is not None), 0)
    limit = _constant(bound)
    if grow is None or grow.opcode != "add" or not reads_counter or start is None or limit is None:
        return None
    span = limit - start
    if stride <= 0 or direction not in ("LT", "LE", "NE"):
        return None
    if direction == "NE":
        return span // stride if span >= 0 and span % stride == 0 else None
    return max(0, -(-span // stride) if direction == "LT" else span // stride + 1)


def _constant(inst: Instruction | None) -> int | None:
    """The value of an integer scalar constant, else None."""
    if inst is None or inst.opcode != "constant" or len(inst.operands) != 1:
        return None
    return int(inst.operands[0]) if re.fullmatch(r"-?\d+", inst.operands[0]) else None


def state_element(inst: Instruction | None, by_name: Mapping[str, Instruction]) -> int | None:
    """Which element of a loop's state ``inst`` is, if it reads one from the loop's parameter."""
    if inst is None or inst.opcode != "get-tuple-element":
        return None
    state = by_name.get(inst.operands[0])
    return tuple_index(inst) if state and state.opcode == "parameter" else None


@overload
def run_counts(program: Program, unknown: int) -> Callable[[str], int]: ...
@overload
def run_counts(program: Program, unknown: None = None) -> Callable[[str], int | None]: ...
def run_counts(program: Program, unknown: int | None = None) -> Callable[[str], int | None]:
    """How many times a computation runs per execution of the entry (once for the entry, or with no
    caller): summed over its callers, the caller's count times the loop's trip count where a
    loop calls it (one more for its condition; ``unknown`` where unknown, None then propagating)."""

    @functools.cache
    def count(comp: str) -> int | None:
        callers = [] if comp == program.entry else program.callers_of(comp)
        total = 0 if callers else 1
        for caller, inst in callers:
            factor: int | None = 1
            if inst.opcode == "while":
                trips = trip_count(inst, program)
                factor = unknown if trips is None else trips
                if factor is not None and comp != loop_parts(inst).get("body"):
                    factor += 1  # the condition runs once more than the body
            runs_there = count(caller)
            if factor is None or runs_there is None:
                return None
            total += runs_there * factor
        return total

    return count
