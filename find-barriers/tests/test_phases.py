"""Which pass an instruction belongs to (:mod:`find_barriers._phases`), on hand-written HLO: the
scopes JAX writes, whole or relative to the call, with and without a module name."""

from __future__ import annotations

import pytest

from find_barriers._phases import BACKWARD, FORWARD, Phases, scope_phase
from find_barriers._program import read_hlo


@pytest.mark.parametrize(
    ("scope", "phase"),
    [
        ("jit(f)/dot_general", FORWARD),
        ("jit(f)/transpose(jvp(g))/dot_general", BACKWARD),
        ("jit(f)/transpose(jvp(g))/checkpoint/rematted_computation/dot_general", FORWARD),
        (
            "jit(f)/transpose(jvp(g))/checkpoint/rematted_computation/transpose(jvp(h))/dot",
            BACKWARD,
        ),
        ("jit(f)/checkpoint/rematted_computation/transpose(jvp(g))/remat/dot", BACKWARD),
        (
            "jit(f)/remat/rematted_computation/transpose(jvp(g))/remat/rematted_computation/dot",
            FORWARD,
        ),
    ],
)
def test_the_innermost_of_backward_and_recomputed_scopes_decides(scope, phase):
    """A gradient taken inside the recomputed forward is backward; a remat inside it forward."""
    assert scope_phase(scope) == phase


@pytest.mark.parametrize(
    ("module", "top"),
    [
        ("jit_train_step", "jit_train_step"),
        ("jit__lambda_", "jit_lambda"),
        ("jit_stepX", "jit_stepX"),
    ],
)
def test_the_module_name_reads_as_its_functions_scope_does(module, top):
    """XLA writes ``jit(<lambda>)`` as ``jit__lambda_``: each run of other characters is one ``_``."""
    assert Phases(read_hlo(f"HloModule {module}\n\nENTRY main {{\n}}\n")).top == top


NESTED = """HloModule jit_step

inner {
  a = f32[4]{0} parameter(0)
  whole = f32[4]{0} negate(a), metadata={op_name="jit(step)/jit(inner)/neg"}
  relative = f32[4]{0} negate(whole), metadata={op_name="jit(inner)/neg"}
  ROOT bare = f32[4]{0} negate(relative), metadata={op_name="neg"}
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT c = f32[4]{0} call(x), to_apply=inner, metadata={op_name="jit(step)/transpose(jvp(f))/jit(inner)"}
}
"""


def phases_of(text: str) -> dict[str, str | None]:
    program = read_hlo(text)
    phases = Phases(program)
    return {name: phases.of(program.by_name[name]) for name in ("whole", "relative", "bare")}


def test_a_name_that_begins_with_the_modules_scope_is_whole_any_other_follows_its_call():
    """A called computation's names are the call's backward scope's, but one written whole."""
    assert phases_of(NESTED) == {"whole": FORWARD, "relative": BACKWARD, "bare": BACKWARD}


def test_without_a_module_name_a_name_that_begins_with_jit_is_whole():
    """With no name to compare, ``jit(...)`` first marks a whole name."""
    unnamed = NESTED.removeprefix("HloModule jit_step\n")
    assert phases_of(unnamed) == {"whole": FORWARD, "relative": FORWARD, "bare": BACKWARD}


CALLED_ENTRY = """HloModule jit_step

ENTRY main {
  x = f32[4]{0} parameter(0)
  n = f32[4]{0} negate(x), metadata={op_name="neg"}
  ROOT one = f32[4]{0} negate(n), metadata={op_name="X"}
}

stray {
  y = f32[4]{0} parameter(0)
  ROOT c = f32[4]{0} call(y), to_apply=main, metadata={op_name="jit(step)/transpose(jvp(f))/main"}
}
"""


def test_the_entrys_names_follow_no_call_and_a_scope_of_one_letter_names_a_pass():
    """The entry's scope is the module's own, even where an edited module calls it; a named scope
    ``X`` is a scope (only an instruction without any has no pass)."""
    program = read_hlo(CALLED_ENTRY)
    phases = Phases(program)
    assert [phases.of(program.by_name[name]) for name in ("x", "n", "one")] == [
        None,
        FORWARD,
        FORWARD,
    ]
