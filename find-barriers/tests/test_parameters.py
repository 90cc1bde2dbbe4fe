"""Which parameter a weight-gradient dot differentiates, and what made a value, on hand-written
HLO: each way a weight is read in the forward pass, each way a value comes out of a call or a
loop, and the edited modules that name nothing (and raise nothing)."""

import pytest

from find_barriers import Role, find_sites
from find_barriers._parameters import Parameters
from find_barriers._program import read_hlo


def edited(text: str, *edits: tuple[str, str]) -> str:
    """``text`` with each ``(old, new)`` of ``edits`` replaced, in turn."""
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


def above(name: str, *lines: str) -> tuple[str, str]:
    """The edit that adds ``lines`` to a computation just above instruction ``name``."""
    return f"  {name} =", "".join(f"  {line}\n" for line in lines) + f"  {name} ="


STEP = """HloModule m

neg {
  np = f32[4,8]{1,0} parameter(0)
  ROOT nn = f32[4,8]{1,0} negate(np)
}

add {
  aa = f32[] parameter(0)
  ab = f32[] parameter(1)
  ROOT as = f32[] add(aa, ab)
}

fwd {
  fw = f32[4,8]{1,0} parameter(0)
  fx = f32[2,4]{1,0} parameter(1)
  ROOT fy = f32[2,8]{1,0} dot(fx, fw), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY main {
  w = f32[4,8]{1,0} parameter(0)
  x = f32[2,4]{1,0} parameter(1)
  g = f32[2,8]{1,0} parameter(2)
  wide = f32[4,1,8]{2,1,0} parameter(3)
  deep = f32[4,2,8]{2,1,0} parameter(4)
  layers = f32[3,4,8]{2,1,0} parameter(5)
  zero = f32[] constant(0)
  at = s32[] constant(0)
  r = f32[4,8]{1,0} copy(w)
  y = f32[2,8]{1,0} dot(x, r), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  gw = f32[4,8]{1,0} dot(x, g), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT out = (f32[2,8]{1,0}, f32[4,8]{1,0}) tuple(y, gw)
}
"""
"""A step whose forward dot ``y`` reads activation ``x`` and, as ``r``, the weight ``w``; ``gw``,
the dot of ``x`` and the gradient ``g``, is ``w``'s gradient."""


def named(text: str) -> str | None:
    """The name of the entry parameter whose gradient ``gw`` (of sizes 4 by 8) is, or None."""
    program = read_hlo(text)
    weight = Parameters(program).of(program.by_name["gw"], (4, 8))
    return weight and weight.name


WEIGHT_READS = {
    "through a copy": ("r = f32[4,8]{1,0} copy(w)", "w"),
    "through a manual computation's local shape": (
        'r = f32[4,8]{1,0} custom-call(w), custom_call_target="SPMDFullToShardShape"',
        "w",
    ),
    "through a sum over a dimension of size 1": (
        "r = f32[4,8]{1,0} reduce(wide, zero), dimensions={1}, to_apply=add",
        "wide",
    ),
    "as one layer of a stack": ("r = f32[4,8]{1,0} reshape(r0)", "layers"),
    "a sum over a dimension of size 2": (
        "r = f32[4,8]{1,0} reduce(deep, zero), dimensions={1}, to_apply=add",
        None,
    ),
    "a value a call computes": ("r = f32[4,8]{1,0} call(w), to_apply=neg", None),
    "a value the step computes": ("r = f32[4,8]{1,0} negate(w)", None),
    "a value from no parameter": ("r = f32[4,8]{1,0} iota(), iota_dimension=0", None),
}


@pytest.mark.parametrize(("line", "expected"), WEIGHT_READS.values(), ids=WEIGHT_READS)
def test_the_forward_dots_weight_is_followed_to_an_entry_parameter(line, expected):
    """Through ops that hand its values on, to the parameter; else the gradient names none."""
    layer = "r0 = f32[1,4,8]{2,1,0} dynamic-slice(layers, at, at, at), dynamic_slice_sizes={1,4,8}"
    assert named(edited(STEP, ("r = f32[4,8]{1,0} copy(w)", line), above("r", layer))) == expected


def test_a_forward_dot_that_reads_the_activation_through_arithmetic_names_no_parameter():
    """It does not read the same activation: ``negate(x)`` is another value."""
    text = edited(STEP, ("dot(x, r)", "dot(xn, r)"), above("y", "xn = f32[2,4]{1,0} negate(x)"))
    assert named(text) is None


def test_a_weight_passed_into_the_call_that_holds_the_forward_dot_is_its_argument():
    """The forward dot in ``fwd`` reads its parameter 0, which the call is given ``w`` as."""
    forward = "dot(x, r), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    text = edited(STEP, (forward, "call(w, x), to_apply=fwd"))
    assert named(text) == "w"
    # a parameter number the call gives no argument for: an edited module, not XLA's
    assert named(edited(text, ("parameter(0)\n  fx", "parameter(2)\n  fx"))) is None


def test_a_dots_operands_past_the_second_are_not_its_activation():
    """A sparse dot's third operand, its metadata, read by the forward dot, names nothing."""
    sparse = ("dot(x, r)", "dot(m, r)"), ("dot(x, g)", "dot(x, g, m)")
    assert named(edited(STEP, *sparse, above("zero", "m = f32[2,4]{1,0} parameter(6)"))) is None


SCAN = """HloModule scan

write {
  wstack = f32[2,4,8]{2,1,0} parameter(0)
  wslab = f32[4,8]{1,0} parameter(1)
  wi = s32[] parameter(2)
  wr = f32[1,4,8]{2,1,0} reshape(wslab)
  wz = s32[] constant(0)
  ROOT wdus = f32[2,4,8]{2,1,0} dynamic-update-slice(wstack, wr, wi, wz, wz)
}

body {
  carry = (s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0}) parameter(0)
  i = s32[] get-tuple-element(carry), index=0
  stack = f32[2,4,8]{2,1,0} get-tuple-element(carry), index=1
  kept = f32[4,8]{1,0} get-tuple-element(carry), index=2
  made = f32[8,4]{1,0} dot(kept, kept), lhs_contracting_dims={}, rhs_contracting_dims={}
  t = f32[4,8]{0,1} transpose(made), dimensions={1,0}
  stacked = f32[2,4,8]{2,1,0} call(stack, t, i), to_apply=write
  peek = f32[1,4,8]{2,1,0} dynamic-slice(stack, i, i, i), dynamic_slice_sizes={1,4,8}
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT carry_out = (s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0}) tuple(next, stacked, kept)
}

again {
  carry2 = (s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0}) parameter(0)
  i2 = s32[] get-tuple-element(carry2), index=0
  stack2 = f32[2,4,8]{2,1,0} get-tuple-element(carry2), index=1
  kept2 = f32[4,8]{1,0} get-tuple-element(carry2), index=2
  one2 = s32[] constant(1)
  next2 = s32[] add(i2, one2)
  ROOT carry2_out = (s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0}) tuple(next2, stack2, kept2)
}

cond {
  cc = (s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0}) parameter(0)
  ci = s32[] get-tuple-element(cc), index=0
  two = s32[] constant(2)
  ROOT lt = pred[] compare(ci, two), direction=LT
}

swap {
  sa = f32[4,8]{1,0} parameter(0)
  sb = f32[4,8]{1,0} parameter(1)
  ROOT st = (f32[4,8]{1,0}, f32[4,8]{1,0}) tuple(sb, sa)
}

ENTRY main {
  w = f32[4,8]{1,0} parameter(0)
  v = f32[4,8]{1,0} parameter(1)
  zero = s32[] constant(0)
  init = f32[2,4,8]{2,1,0} broadcast(), dimensions={}
  state = (s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0}) tuple(zero, init, w)
  result = (s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0}) while(state), condition=cond, body=body
  stack_out = f32[2,4,8]{2,1,0} get-tuple-element(result), index=1
  kept_out = f32[4,8]{1,0} get-tuple-element(result), index=2
  layer = f32[1,4,8]{2,1,0} dynamic-slice(stack_out, zero, zero, zero), dynamic_slice_sizes={1,4,8}
  swapped = (f32[4,8]{1,0}, f32[4,8]{1,0}) call(w, v), to_apply=swap
  first = f32[4,8]{1,0} get-tuple-element(swapped), index=0
  ROOT out = (f32[2,4,8]{2,1,0}, f32[4,8]{1,0}, f32[1,4,8]{2,1,0}, f32[4,8]{1,0}) tuple(stack_out, kept_out, layer, first)
}
"""
"""A scan of two trips that stacks ``t``, a transpose of the dot ``made``, into element 1 of its
state (by a call of ``write``, as ``dynamic_update_index_in_dim``) and passes element 2, the
parameter ``w``, on unchanged; ``layer`` reads one layer of the stack. ``again`` is a loop body
that passes every element on; ``swap`` a call that returns its arguments the other way round."""


def origin(text: str, name: str) -> tuple[str | None, bool]:
    """What made value ``name`` of ``text`` (its name), and whether it was sliced on the way."""
    made, sliced = Parameters(read_hlo(text)).origin(name)
    return made and made.name, sliced


def test_a_layer_of_a_scans_stack_is_what_each_trip_wrote_into_it():
    """Read one slice at a time, the stack is the value the body writes (followed through the
    transpose, as a stacked layer is laid out layer first); read whole, it is the stack."""
    assert origin(SCAN, "layer") == ("made", True)
    assert origin(SCAN, "stack_out") == ("stack_out", False)
    assert origin(SCAN, "peek") == ("stack", True)  # in the body: the stack so far, not one trip's


def test_an_element_of_a_calls_result_is_what_its_callee_returns_there():
    assert origin(SCAN, "first") == ("v", False)
    packed = ("tuple(sb, sa)", 'custom-call(sb, sa), custom_call_target="Pack"')
    assert origin(edited(SCAN, packed), "first") == ("first", False)  # no tuple: not said


def read_from(name: str, line: str) -> list[tuple[str, str]]:
    """The edits that read ``stack_out`` from a new ``name`` (made by ``line``), not ``result``."""
    return [("(result), index=1", f"({name}), index=1"), above("stack_out", f"{name} = {line}")]


STATE = "(s32[], f32[2,4,8]{2,1,0}, f32[4,8]{1,0})"
ANOTHER_STACK = "fresh = f32[2,4,8]{2,1,0} broadcast(), dimensions={}"
STACKED_EDITS = {
    "written by a dynamic-update-slice in the body": (
        [
            ("call(stack, t, i), to_apply=write", "dynamic-update-slice(stack, tr, i, i, i)"),
            above("stacked", "tr = f32[1,4,8]{2,1,0} reshape(t)"),
        ],
        ("made", True),
    ),
    "read through an optimisation barrier": (
        read_from("barrier", f"{STATE} opt-barrier(result)"),
        ("made", True),
    ),
    "passed on by a second loop": (
        read_from("result2", f"{STATE} while(result), condition=cond, body=again"),
        ("made", True),
    ),
    "a call that writes nothing": (
        [("dynamic-update-slice(wstack, wr, wi, wz, wz)", "negate(wstack)")],
        ("stack_out", True),
    ),
    "a call the module does not hold": ([("to_apply=write", "to_apply=gone")], ("stack_out", True)),
    "a call naming a second computation, read by its first (edited)": (
        [("to_apply=write", "to_apply=write, calls=swap")],
        ("made", True),
    ),
    "a write into another stack": (
        [("call(stack, t, i)", "call(fresh, t, i)"), above("stacked", ANOTHER_STACK)],
        ("stack_out", True),
    ),
}


@pytest.mark.parametrize(("edits", "expected"), STACKED_EDITS.values(), ids=STACKED_EDITS)
def test_a_layer_of_a_stack_is_what_the_loop_wrote_only_where_it_writes_into_its_own_state(
    edits, expected
):
    assert origin(edited(SCAN, *edits), "layer") == expected


def module(*lines: str, before: str = "") -> str:
    """A module of computations ``before`` and an entry of ``lines``."""
    return f"HloModule m\n{before}\nENTRY main {{\n" + "".join(f"  {x}\n" for x in lines) + "}\n"


TAKE = """
take {
  kp = f32[3,4,8]{2,1,0} parameter(0)
  ki = s32[] parameter(1)
  kz = s32[] constant(0)
  kc = f32[3,4,8]{2,1,0} broadcast(), dimensions={}
  ROOT ks = f32[1,4,8]{2,1,0} dynamic-slice(SLICED, ki, kz, kz), dynamic_slice_sizes={1,4,8}
}
"""
"""``dynamic_index_in_dim``: a computation that returns one layer of its first argument
(``SLICED`` ``kp``), or of a value of its own (``kc``)."""
ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""
CALLS_MAIN = """
again {
  q = f32[4,8]{1,0} parameter(0)
  ROOT r = f32[4,8]{1,0} call(q), to_apply=main
}
"""
"""A computation that calls the entry: an edited module, not one XLA writes."""
TAKEN = (
    "p = f32[3,4,8]{2,1,0} parameter(0)",
    "i = s32[] parameter(1)",
    "c = f32[1,4,8]{2,1,0} call(p, i), to_apply=take",
)
ORIGINS = {
    "one layer a call takes": (module(*TAKEN, before=TAKE.replace("SLICED", "kp")), ("p", True)),
    "one layer a call naming a second computation takes, by its first (edited)": (
        module(*TAKEN[:2], f"{TAKEN[2]}, calls=add", before=TAKE.replace("SLICED", "kp") + ADD),
        ("p", True),
    ),
    "a layer a call takes of its own value": (
        module(*TAKEN, before=TAKE.replace("SLICED", "kc")),
        ("c", False),
    ),
    "a sum of one element over its dimension of size 1": (
        module(
            "p = f32[1,1]{1,0} parameter(0)",
            "z = f32[] constant(0)",
            "c = f32[1]{0} reduce(p, z), dimensions={1}, to_apply=add",
            before=ADD,
        ),
        ("p", False),
    ),
    "a sum of no elements": (
        module(
            "p = f32[0,1]{1,0} parameter(0)",
            "z = f32[] constant(0)",
            "c = f32[0]{0} reduce(p, z), dimensions={1}, to_apply=add",
            before=ADD,
        ),
        ("c", False),
    ),
    "an element of a tuple parameter of the entry": (
        module(
            "p = (f32[4,8]{1,0}, f32[4,8]{1,0}) parameter(0)",
            "c = f32[4,8]{1,0} get-tuple-element(p), index=0",
        ),
        ("c", False),
    ),
    "a parameter of the entry, though a computation calls it": (
        module("p = f32[4,8]{1,0} parameter(0)", "c = f32[4,8]{1,0} copy(p)", before=CALLS_MAIN),
        ("p", False),
    ),
}


@pytest.mark.parametrize(("text", "expected"), ORIGINS.values(), ids=ORIGINS)
def test_what_made_a_value_and_whether_it_was_sliced(text, expected):
    assert origin(text, "c") == expected


SHARDED_PAIR = '(f32[4,8]{1,0}, f32[4,8]{1,0}) custom-call(swapped), custom_call_target="Sharding"'
UNSAID = {
    "a loop body whose result is no tuple": (
        [
            (
                "tuple(next, stacked, kept)",
                'custom-call(next, stacked, kept), custom_call_target="Pack"',
            )
        ],
        "kept_out",
    ),
    "a loop body the module does not hold": ([("body=body", "body=gone")], "kept_out"),
    "an element past the loop body's result": (
        [above("layer", "c = f32[4,8]{1,0} get-tuple-element(result), index=3")],
        "c",
    ),
    "an element past what a Sharding call is given": (
        [
            above(
                "layer", f"c0 = {SHARDED_PAIR}", "c = f32[4,8]{1,0} get-tuple-element(c0), index=1"
            )
        ],
        "c",
    ),
    "a Sharding call of nothing": (
        [above("layer", 'c = f32[4,8]{1,0} custom-call(), custom_call_target="Sharding"')],
        "c",
    ),
    "a call of a computation the module does not hold": (
        [above("layer", "c = f32[4,8]{1,0} call(w), to_apply=gone")],
        "c",
    ),
}


@pytest.mark.parametrize(("edits", "name"), UNSAID.values(), ids=UNSAID)
def test_where_the_module_does_not_say_the_value_is_its_own_origin(edits, name):
    """Edited modules, not ones XLA writes: what made the value is not looked for further."""
    assert origin(SCAN, "kept_out") == ("w", False)  # as the loop started: passed on unchanged
    assert origin(edited(SCAN, *edits), name) == (name, False)


@pytest.mark.parametrize(
    "lines",
    [
        ["c = f32[4,8]{1,0} copy(gone)"],
        ["c = f32[4,8]{1,0} copy(d)", "d = f32[4,8]{1,0} copy(c)"],
    ],
    ids=["a value the module does not hold", "values that make each other"],
)
def test_a_value_made_by_nothing_the_module_holds_has_no_origin(lines):
    """Edited modules, not ones XLA writes: None, not an error or a loop without end."""
    assert origin(module(*lines), "c") == (None, False)


def test_a_gradient_of_a_value_the_module_does_not_hold_names_no_parameter():
    assert named(edited(STEP, ("dot(x, g)", "dot(gone, g)"))) is None


STORED_TRANSPOSED = """HloModule jit_step

ENTRY main {
  w = f32[8,4]{1,0} parameter(0)
  x = f32[2,4]{1,0} parameter(1)
  g = f32[2,8]{1,0} parameter(2)
  y = f32[2,8]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  d = f32[8,4]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  s = f32[8,4]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}
  t = f32[4,8]{0,1} transpose(s), dimensions={1,0}
  ROOT out = (f32[2,8]{1,0}, f32[4,8]{1,0}) tuple(y, t)
}
"""
"""A kernel ``w`` stored as 8 by 4, whose gradient's transpose comes out 4 by 8."""


def test_a_kernel_stored_transposed_is_the_parameter_of_a_gradient_of_its_sizes_in_another_order():
    (site,) = find_sites(read_hlo(STORED_TRANSPOSED))
    assert (site.parameter, site.role) == ("w", Role.WEIGHT_GRADIENT)
