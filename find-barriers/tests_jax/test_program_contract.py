"""The contract every :class:`~find_barriers._program.Program` backend keeps, checked on both
readers of the same lowered steps: the HLO text JAX prints (``read_hlo``) and the StableHLO
module."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import jax
import pytest

from find_barriers._program import (
    Frame,
    Instruction,
    Program,
    Value,
    callees,
    read_hlo,
    tuple_index,
)
from find_barriers._shapes import array_shapes
from find_barriers._stablehlo import StableHLOProgram
from tests_jax.jax_steps import STEPS, lowered

READERS: dict[str, Callable[[jax.stages.Lowered], Program]] = {
    "hlo_text": lambda step: read_hlo(step.as_text(dialect="hlo", debug_info=True)),
    "stablehlo": lambda step: StableHLOProgram(step.compiler_ir()),
}


@pytest.fixture(params=list(itertools.product(STEPS, READERS)), ids="-".join)
def program(request: pytest.FixtureRequest) -> Program:
    step, reader = request.param
    return READERS[reader](lowered(step))


def values(inst: Instruction) -> list[Value]:
    """What ``inst`` holds: its result, and each element where it is a tuple."""
    elements = len(array_shapes(inst.shape)) if inst.shape.startswith("(") else 0
    return [inst.name, *((inst.name, index) for index in range(elements))]


def reached(program: Program) -> dict[str, Instruction]:
    """Every record reached from the transposes, by name: through operands and users, to what
    calls a record's computation and to the root of each computation a record calls."""
    found: dict[str, Instruction] = {}
    pending = [inst for _, inst in program.transposes()]
    while pending:
        inst = pending.pop()
        if inst.name not in found:
            found[inst.name] = inst
            pending += [program.by_name[o] for o in inst.operands if o in program.by_name]
            pending += [user for value in values(inst) for user, _ in program.users(value)]
            pending += [caller for _, caller in program.callers_of(program.owner[inst.name])]
            pending += [program.by_name[program.roots[called]] for called in callees(inst)]
    return found


def computations(program: Program) -> set[str]:
    return {program.owner[name] for name in reached(program)}


def entry_parameters(program: Program) -> list[str]:
    """The entry's parameters in order, asked for until the first it lacks."""
    found = (program.parameter(program.entry, index) for index in itertools.count())
    return [name for name in itertools.takewhile(bool, found) if name]


def test_each_reader_is_a_program_of_a_named_module(program):
    assert isinstance(program, Program)
    assert program.name.startswith("jit_")
    assert program.entry in program.roots


def test_each_transpose_is_a_record_of_its_computation(program):
    found = program.transposes()
    assert found
    for computation, inst in found:
        assert inst.opcode == "transpose"
        assert program.by_name[inst.name] == inst
        assert program.owner[inst.name] == computation


def test_each_operand_read_is_a_use_of_it(program):
    for inst in reached(program).values():
        for index, operand in enumerate(inst.operands):
            if operand in program.by_name:
                element = inst.opcode == "get-tuple-element"
                value = (operand, tuple_index(inst)) if element else operand
                assert (inst, index) in program.users(value), (inst, index)


def test_each_use_reads_the_value_as_that_operand(program):
    for inst in reached(program).values():
        for value in values(inst):
            for user, index in program.users(value):
                assert user.operands[index] == inst.name
                if isinstance(value, tuple):
                    assert (user.opcode, tuple_index(user)) == ("get-tuple-element", value[1])


def test_each_computation_has_a_root_of_its_own(program):
    for computation in computations(program):
        assert program.owner[program.roots[computation]] == computation


def test_each_computation_but_the_entry_is_called_by_what_names_it(program):
    assert program.callers_of(program.entry) == []
    for computation in computations(program) - {program.entry}:
        callers = program.callers_of(computation)
        assert callers, computation
        for caller, inst in callers:
            assert program.owner[inst.name] == caller
            assert computation in callees(inst)


def test_parameters_are_their_computations_in_order(program):
    names = entry_parameters(program)
    assert names
    for index, name in enumerate(names):
        inst = program.by_name[name]
        assert (inst.opcode, inst.operands[:1]) == ("parameter", (str(index),))
        assert program.owner[name] == program.entry


def test_metadata_is_a_name_and_frames(program):
    for inst in reached(program).values():
        assert program.op_name(inst) is None or isinstance(program.op_name(inst), str)
        assert all(isinstance(frame, Frame) for frame in program.stack(inst))
    for stack in program.known_stacks():
        assert all(isinstance(frame, Frame) for frame in stack)
    assert all(isinstance(n, int) for pair in program.aliases.items() for n in pair)


def summary(program: Program) -> tuple:
    """What a module is, whichever reader: its name, its transposes' shapes (no layouts), its
    entry's parameter count and its donated buffers."""
    shapes = sorted(inst.shape.split("{")[0] for _, inst in program.transposes())
    return program.name, shapes, len(entry_parameters(program)), dict(program.aliases)


@pytest.mark.parametrize("step", STEPS)
def test_both_readers_see_the_same_module(step):
    hlo_text, stablehlo = (summary(read(lowered(step))) for read in READERS.values())
    assert hlo_text == stablehlo
    assert bool(stablehlo[3]) == (step == "donated")


def test_a_value_entering_a_loop_goes_through_its_state_tuple_on_both_readers():
    for read in READERS.values():
        program = read(lowered("loops"))
        for index in (0, 1):  # x and n: each a part of a loop's state
            ((state, _),) = program.users(program.parameter(program.entry, index))
            assert state.opcode == "tuple"
            assert [user.opcode for user, _ in program.users(state.name)] == ["while"]
