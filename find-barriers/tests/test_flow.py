"""Where a value goes (:class:`~find_barriers._flow.Flow`), on hand-written HLO: the outputs it
reaches and whether every use was followed, through each kind of op that carries it."""

from __future__ import annotations

import pytest

from find_barriers._flow import Flow, Reach
from find_barriers._program import read_hlo


def reach(text: str, name: str, same_value: bool = False) -> Reach:
    return Flow(read_hlo(text), same_value=same_value).reach(name)


LAYOUTS = """HloModule m

ENTRY main {
  x = f32[2,4]{1,0} parameter(0)
  r = f32[4,2]{1,0} reshape(x)
  b = f32[4,2]{1,0} opt-barrier(r)
  n = f32[2,4]{1,0} negate(x)
  ROOT out = (f32[4,2]{1,0}, f32[2,4]{1,0}) tuple(b, n)
}
"""


def test_the_same_value_is_followed_through_layouts_and_barriers_but_not_arithmetic():
    """As the parameter finder follows a weight: a reshape and a barrier hand it on, a negate not."""
    assert reach(LAYOUTS, "x", same_value=True) == Reach(frozenset({0}))
    assert reach(LAYOUTS, "x") == Reach(frozenset({0, 1}))


DIAMOND = """HloModule m

ENTRY main {
  x = f32[2,4]{1,0} parameter(0)
  w = f32[4,3]{1,0} parameter(1)
  a = f32[2,4]{1,0} add(x, x)
  d = f32[2,3]{1,0} dot(a, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = (f32[2,4]{1,0}, f32[2,3]{1,0}) tuple(x, d)
}
"""


def test_a_dot_a_value_reaches_twice_over_is_read_once_and_outputs_are_not_followed():
    """An add of the value with itself reaches the dot twice: it is listed once."""
    flow = Flow(read_hlo(DIAMOND))
    assert [(dot.name, index) for dot, index in flow.dots_reading("x")] == [("d", 0)]


ELEMENT = """HloModule m

ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  t = (f32[4]{0}, f32[4]{0}) tuple(x, y)
  g = f32[4]{0} get-tuple-element(t), index=0
READER
  ROOT out = (f32[4]{0}) tuple(g)
}
"""


@pytest.mark.parametrize(
    ("reader", "unfollowed"),
    [
        ("", False),
        ("  nested = ((f32[4]{0}, f32[4]{0})) tuple(t)", True),
        ('  k = f32[4]{0} custom-call(t), custom_call_target="Kernel"', True),
    ],
)
def test_a_tuple_read_whole_by_a_tuple_or_custom_call_leaves_its_elements_unfollowed(
    reader, unfollowed
):
    """The element still reaches the output its get-tuple-element gives; a use that reads its
    tuple whole, in another tuple or a custom call, is not followed, and says so."""
    assert reach(ELEMENT.replace("READER", reader), "x") == Reach(frozenset({0}), unfollowed)


CONDITIONAL = """HloModule m

only {
  p = f32[4]{0} parameter(0)
  ROOT n = f32[4]{0} negate(p)
}

ENTRY main {
  i = s32[] parameter(0)
  x = f32[4]{0} parameter(1)
  c = f32[4]{0} conditional(i, x), branch_computations={only}
  ROOT out = (f32[4]{0}) tuple(c)
}
"""


def test_a_conditional_of_one_branch_carries_its_operand_and_not_its_index():
    """The operand enters the only branch and leaves as the conditional's result."""
    assert reach(CONDITIONAL, "x") == Reach(frozenset({0}))
    assert reach(CONDITIONAL, "i") == Reach()


CALLS = """HloModule m

drop {
  p = f32[4]{0} parameter(0)
  q = f32[4]{0} parameter(1)
  n = f32[4]{0} negate(p)
  rq = f32[4]{0} negate(q)
  ROOT r = f32[4]{0} negate(rq)
}

twice {
  v = f32[4]{0} parameter(0)
  s = f32[4]{0} add(v, v)
  ROOT m = f32[4]{0} negate(s)
}

swap {
  pair = (f32[4]{0}, f32[4]{0}) parameter(0)
  a = f32[4]{0} get-tuple-element(pair), index=0
  b = f32[4]{0} get-tuple-element(pair), index=1
  ROOT ba = (f32[4]{0}, f32[4]{0}) tuple(b, a)
}

opaque {
  o = f32[4]{0} parameter(0)
  ROOT kern = f32[4]{0} custom-call(o), custom_call_target="Kernel"
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  z = f32[4]{0} parameter(2)
  u = f32[4]{0} parameter(3)
  c1 = f32[4]{0} call(x, y), to_apply=drop
  c2 = f32[4]{0} call(z), to_apply=twice
  k = (f32[4]{0}, f32[4]{0}) tuple(x, y)
  c3 = (f32[4]{0}, f32[4]{0}) call(k), to_apply=swap
  e0 = f32[4]{0} get-tuple-element(c3), index=0
  e1 = f32[4]{0} get-tuple-element(c3), index=1
  c4 = f32[4]{0} call(u), to_apply=opaque
  ROOT out = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(c1, c2, e0, e1, c4)
}
"""


def test_a_call_gives_back_only_what_its_computation_returns_of_each_operand():
    """``drop`` returns its second operand and drops its first; ``swap`` returns the elements of
    the tuple it takes in the other order; ``opaque`` hands its operand to an unknown kernel."""
    flow = Flow(read_hlo(CALLS))
    assert flow.reach("x") == Reach(frozenset({3}))  # dropped by c1; through c3's element 1
    assert flow.reach("y") == Reach(frozenset({0, 2}))  # c1's result; through c3's element 0
    assert flow.reach("u") == Reach(unfollowed=True)  # what the kernel gives back is unknown


def test_a_value_reaching_a_calls_result_twice_over_gives_the_call_once():
    """Each place a value goes next is listed once, however many paths lead there."""
    assert Flow(read_hlo(CALLS)).onward("z") == ["c2"]


LOOPS = """HloModule m

cond {
  cs = (s32[], f32[4]{0}) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  bound = s32[] constant(3)
  ROOT lt = pred[] compare(ci, bound), direction=LT
}

body {
  bs = (s32[], f32[4]{0}) parameter(0)
  bi = s32[] get-tuple-element(bs), index=0
  bv = f32[4]{0} get-tuple-element(bs), index=1
  one = s32[] constant(1)
  next = s32[] add(bi, one)
  neg = f32[4]{0} negate(bv)
  ROOT step = (s32[], f32[4]{0}) tuple(next, neg)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]{0}) tuple(zero, x)
  ROOT loop = (s32[], f32[4]{0}) while(init), condition=cond, body=body
}
"""


def test_a_loops_state_reaches_its_result_and_its_condition_reaches_nothing():
    """The condition's result decides the loop; it is no part of the loop's result."""
    flow = Flow(read_hlo(LOOPS))
    assert flow.reach("x") == Reach(frozenset({1}))
    assert (flow.reach("bound"), flow.reach("lt")) == (Reach(), Reach())


TWO_LOOPS = LOOPS.replace("ROOT loop =", "loop =").removesuffix("}\n") + (
    "  v1 = f32[4]{0} get-tuple-element(loop), index=1\n"
    "  again = (s32[], f32[4]{0}) tuple(zero, v1)\n"
    "  loop2 = (s32[], f32[4]{0}) while(again), condition=cond, body=body\n"
    "  v2 = f32[4]{0} get-tuple-element(loop2), index=1\n"
    "  ROOT out = (f32[4]{0}) tuple(v2)\n"
    "}\n"
)
""":data:`LOOPS` run twice over, the second loop on the first one's result."""


def test_two_loops_that_share_a_body_are_followed_round_to_the_output():
    """The shared body's result is each loop's: the first loop's leads into the second, and back
    into the body the reading is already in."""
    assert reach(TWO_LOOPS, "x") == Reach(frozenset({0}))


KERNEL = """HloModule m

combine {
  ka = f32[] parameter(0)
  kb = f32[] parameter(1)
  ROOT kv = f32[] add(ka, kb)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  ROOT k = f32[4]{0} custom-call(x), custom_call_target="Kernel", to_apply=combine
}
"""


def test_a_computation_a_custom_call_applies_gives_its_result_to_an_unfollowed_use():
    """What a custom call does with its computation's result is not known."""
    assert reach(KERNEL, "kv") == Reach(unfollowed=True)


COMBINED = """HloModule m

add {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}

ENTRY main {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  both = (f32[4]{0}, f32[4]{0}) all-reduce(x, y), replica_groups={}, to_apply=add
  e = f32[4]{0} get-tuple-element(both), index=1
  ROOT out = (f32[4]{0}) tuple(e)
}
"""


def test_a_combined_all_reduce_carries_each_operand_in_its_own_element():
    """A tuple-shaped all-reduce gives operand i as element i, which is followed alone."""
    assert (reach(COMBINED, "x"), reach(COMBINED, "y")) == (Reach(), Reach(frozenset({0})))


@pytest.mark.parametrize("names", ["", ", to_apply=twice, calls=drop"])
def test_a_call_that_names_no_computation_or_two_is_not_followed(names):
    """An edited module's call: which computation gives its result is not known."""
    text = CALLS.replace("call(z), to_apply=twice", f"call(z){names}")
    assert reach(text, "z") == Reach(unfollowed=True)
