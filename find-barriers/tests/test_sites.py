"""Transpose-of-dot sites on hand-written HLO: what stands between, XLA's fold conditions, loops,
outputs, parameters and the user's line."""

import dataclasses

import pytest
from hlo_texts import FRAMES, LOOP, SHORTHAND_LOOP, SITES, dot_then_transpose

from find_barriers._flow import Flow
from find_barriers._frames import layer_lines, readable, user_frames
from find_barriers._loops import run_counts
from find_barriers._program import Frame, read_hlo
from find_barriers._sites import TransposeSite, find_sites


def by_transpose(text: str) -> dict[str, TransposeSite]:
    return {site.transpose: site for site in find_sites(read_hlo(text))}


def test_what_stands_between_decides_the_verdict():
    sites = by_transpose(SITES)
    assert set(sites) == {"t1", "t2", "t3", "t6"}  # t4 reads a negate, t5 a parameter
    assert (sites["t1"].between, sites["t1"].verdict) == (("Sharding",), "blocked")
    assert (sites["t2"].between, sites["t2"].verdict) == ((), "foldable")
    assert sites["t3"].no_fold.startswith("an all-reduce stands between")
    assert (sites["t6"].verdict, sites["t6"].no_fold) == ("kept", "the dot has 2 users")
    assert sites["t1"].chain == "dot f32[32,16] -> Sharding -> transpose f32[16,32]"


def test_sites_carry_the_dot_shape_op_name_source_and_output():
    sites = by_transpose(SITES)
    assert (sites["t2"].dot_shape, sites["t2"].op_name) == ("f32[32,16]", "jit(step)/dot_general")
    assert str(sites["t2"].source) == "/somewhere/site-packages/model/layers.py:42"
    assert (sites["t1"].op_name, sites["t1"].source) == (None, None)
    assert [sites[name].output for name in ("t1", "t3")] == [1, None]
    assert sites["t2"].output is None  # a forward pass's value: no output is looked for


def test_a_site_in_a_loop_runs_once_per_trip_read_from_the_loop_condition():
    (site,) = find_sites(read_hlo(LOOP))
    assert (site.trips, str(site).endswith("x2 per run (in a loop)")) == (2, True)
    assert find_sites(read_hlo(LOOP.replace("constant(2)", "constant(7)")))[0].trips == 7
    assert find_sites(read_hlo(LOOP.replace("direction=LT", "direction=LE")))[0].trips == 3
    known = LOOP.replace("body=body", 'body=body, backend_config={"known_trip_count":{"n":"9"}}')
    assert find_sites(read_hlo(known))[0].trips == 9  # what XLA wrote wins
    unknown = find_sites(read_hlo(LOOP.replace("compare(i, two)", "compare(i, i)")))[0]
    assert unknown.trips is None
    assert "x? per run (in a loop)" in str(unknown)


def test_the_shorthand_loop_reads_as_the_longhand_one():
    """JAX 0.12 dumps ``%carry#2``: the trip count and the output are found as before."""
    (longhand,) = find_sites(read_hlo(LOOP))
    (shorthand,) = find_sites(read_hlo(SHORTHAND_LOOP))
    assert (shorthand.trips, shorthand.output, shorthand.role) == (2, 0, "weight gradient")
    assert (shorthand.trips, shorthand.output) == (longhand.trips, longhand.output)


def test_a_loops_condition_runs_once_more_than_its_body():
    count = run_counts(read_hlo(LOOP))
    assert (count("main"), count("body"), count("cond"), count("update")) == (1, 2, 3, 4)
    assert count("nothing calls it") == 1


def test_outputs_are_followed_through_a_loop_body_and_the_call_that_stacks_them():
    flow = Flow(read_hlo(LOOP))
    assert {name: flow.reach(name).outputs for name in ("t", "d", "unrelated", "w")} == {
        "t": {0},  # transpose -> stacking call -> loop result -> the entry's root
        "d": {0},  # the dot's value flows the same way, through the transpose
        "unrelated": set(),  # a value nothing reads reaches nothing
        "w": set(),  # the weights go round the loop in its state, an element nothing reads
    }
    changed = Flow(read_hlo(LOOP.replace("call(stack, t, i)", "call(stack, stack, i)")))
    assert changed.reach("t").outputs == set()


CALL_RESULT = """
%pair (a: f32[2,4], b: f32[2,4]) -> (f32[2,4], f32[2,4]) {
  %a = f32[2,4] parameter(0)
  %b = f32[2,4] parameter(1)
  %n = f32[2,4] negate(%a)
  ROOT %t = (f32[2,4], f32[2,4]) tuple(%n, %b)
}

ENTRY %main (x: f32[2,3], w: f32[3,4]) -> f32[4,2] {
  %x = f32[2,3] parameter(0)
  %w = f32[3,4] parameter(1)
  %d = f32[2,4] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %c = (f32[2,4], f32[2,4]) call(%d, %d), to_apply=%pair
  %e = f32[2,4] get-tuple-element(%c), index=0
  ROOT %t = f32[4,2] transpose(%e), dimensions={1,0}
}
"""


def test_a_calls_result_is_made_in_the_call_not_passed_through():
    assert find_sites(read_hlo(CALL_RESULT)) == []
    passed = CALL_RESULT.replace("tuple(%n, %b)", "tuple(%a, %b)")  # now the dot's own value
    assert find_sites(read_hlo(passed)) == []  # still a call's result: not followed into it


def test_the_users_line_is_the_first_frame_outside_the_libraries():
    (site,) = find_sites(read_hlo(FRAMES))
    flax, train = site.stack
    assert (readable(flax), str(train)) == ("flax/nnx/nn/linear.py:422", "/home/me/train.py:58")
    assert (site.user_stack, site.user_line, site.via) == ((train,), train, None)
    assert site.where == "/home/me/train.py:58"


def test_a_helper_several_layers_share_shows_each_layers_line_via_it():
    helper, a, b, step = (Frame("m.py", n) for n in (38, 54, 60, 9))
    assert layer_lines([(helper, a, step), (helper, b, step)]) == [(a, helper), (b, helper)]
    assert layer_lines([(helper, a, step)]) == [(helper, None)]  # one caller: not a shared helper
    assert layer_lines([(helper, a, step)], context=[(helper, b, step)]) == [(a, helper)]
    assert layer_lines([(helper, a, step)], context=[(helper, a)]) == [(helper, None)]  # cut short
    assert layer_lines([()]) == [(None, None)]


def test_pythons_own_frames_are_not_the_users():
    """A driver run with ``runpy``: its frames are Python's, not the user's."""
    runpy = [Frame("<frozen runpy>", 88), Frame("/usr/lib/python3.12/runpy.py", 286)]
    mine = Frame("/srv/lib/python3.12/site-packages/mine/train.py", 3)
    assert user_frames([*runpy, mine, Frame("/home/me/train.py", 5)]) == (
        mine,
        Frame("/home/me/train.py", 5),
    )


def test_frames_repeated_by_nested_traces_count_once():
    jax_frame = Frame("/v/lib/site-packages/jax/_src/api.py", 3)
    model, step = Frame("/me/m.py", 5, "M.__call__"), Frame("/me/t.py", 9, "step")
    assert user_frames([jax_frame, model, step, jax_frame, model, step]) == (model, step)


def test_maxtexts_process_wide_constraint_shim_is_not_the_users_line():
    """Once imported, MaxText's tunix adapter wraps ``with_sharding_constraint`` for every caller."""
    shim = Frame("/v/site-packages/maxtext/integration/tunix/tunix_adapter.py", 43)
    layer = Frame("/v/site-packages/maxtext/layers/linears.py", 9)
    assert user_frames([shim, layer]) == (layer,)


def test_a_site_reads_as_one_line():
    site = TransposeSite("t", "f32[2,8]", "d", ("Sharding",), "f32[8,2]", trips=3)
    site = dataclasses.replace(site, output="w", user_line=Frame("/elsewhere/m.py", 3))
    site = dataclasses.replace(site, role="weight gradient", via=Frame("/elsewhere/m.py", 1))
    line = "/elsewhere/m.py:3 via /elsewhere/m.py:1  weight gradient (output w)"
    assert (
        str(site)
        == f"blocked   {line}  dot f32[8,2] -> Sharding -> transpose f32[2,8]  x3 per run (in a loop)"
    )
    assert site.one_line("accepted").startswith(f"accepted  {line}")
    bare = dataclasses.replace(site, output=None, user_line=None, via=None, role="unknown")
    assert str(bare).startswith("blocked   no source line  unknown  dot")


def test_find_sites_of_anything_but_a_program_says_what_to_pass():
    class Lowered:  # as jax.stages names it
        __module__ = "jax._src.stages"

    for value, kind in ((Lowered(), "a jax.stages.Lowered"), (SITES, "a str")):
        with pytest.raises(
            TypeError, match=f"^find_sites takes a program or a module, not {kind}: "
        ):
            find_sites(value)
    with pytest.raises(TypeError, match=r"find_barriers\.jax\.lowered_sites\(lowered\) for a jax"):
        find_sites(Lowered())


@pytest.mark.parametrize(
    ("between", "read", "expected"),
    [
        (("c1 = f32[16,32]{1,0} copy(d)", "c2 = f32[16,32]{1,0} copy(c1)"), "c2", ("copy", "copy")),
        (
            (
                "k = (f32[16,32]{1,0}, f32[8,16]{1,0}) tuple(d, a)",
                "e = f32[16,32]{1,0} get-tuple-element(k), index=0",
            ),
            "e",
            ("get-tuple-element", "tuple"),
        ),
        (
            ("k = (f32[16,32]{1,0}) tuple(d)", "e = f32[16,32]{1,0} get-tuple-element(k), index=0"),
            "e",
            ("get-tuple-element", "tuple"),
        ),
    ],
)
def test_a_dot_is_followed_through_copies_and_into_the_tuple_element_read(between, read, expected):
    """Each pass-through op stands between, and a tuple, of one element or more, is followed into
    the element read."""
    (site,) = find_sites(read_hlo(dot_then_transpose(*between, last=read)))
    assert (site.dot, site.between) == ("d", expected)


@pytest.mark.parametrize(
    ("between", "read"), [("c = f32[16,32]{1,0} copy(d)", ""), ("c = f32[16,32]{1,0} copy()", "c")]
)
def test_an_op_with_no_operand_ends_the_search_for_a_dot(between, read):
    assert find_sites(read_hlo(dot_then_transpose(between, last=read))) == []


PARAMETERS = """
HloModule jit_step

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  w = f32[3,4]{1,0} parameter(1)
  g = f32[2,4]{1,0} parameter(2)
  y = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/dot_general"}
  ty = f32[4,2]{0,1} transpose(y), dimensions={1,0}
  d = f32[4,3]{1,0} dot(g, x), lhs_contracting_dims={0}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/transpose(jvp())/dot_general"}
  t = f32[3,4]{0,1} transpose(d), dimensions={1,0}
  ROOT out = f32[4,2]{0,1} copy(ty)
}
"""
"""A forward dot ``y`` of ``x`` and ``w``, and the backward dot ``d`` of ``g`` and ``x``: the
gradient of ``w``, which no output reaches."""


def test_a_parameter_is_looked_for_in_the_backward_pass_only():
    """The backward dot is the gradient of the parameter its forward dot reads, reaching no output;
    the forward dot, whose operand the backward dot reads beside ``g``, is no parameter's."""
    sites = by_transpose(PARAMETERS)
    assert (sites["t"].parameter, str(sites["t"].role), sites["t"].output) == (
        "w",
        "weight gradient",
        None,
    )
    assert (sites["ty"].parameter, str(sites["ty"].role)) == (None, "forward")


ORDER = """
HloModule jit_step

FileNames
1 "/home/me/model.py"
2 ""

FunctionNames
1 "a"
2 "b"

FileLocations
1 {file_name_id=1 function_name_id=1 line=5 end_line=5 column=1 end_column=2}
2 {file_name_id=1 function_name_id=2 line=5 end_line=5 column=1 end_column=2}
3 {file_name_id=2 line=0 end_line=0 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=0}
2 {file_location_id=2 parent_frame_id=0}
3 {file_location_id=3 parent_frame_id=0}


ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  w = f32[3,4]{1,0} parameter(1)
  d1 = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="q" stack_frame_id=1}
  t1 = f32[4,2]{0,1} transpose(d1), dimensions={1,0}
  d2 = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="p" stack_frame_id=2}
  t2 = f32[4,2]{0,1} transpose(d2), dimensions={1,0}
  d3 = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="D" stack_frame_id=3}
  t3 = f32[4,2]{0,1} transpose(d3), dimensions={1,0}
  d4 = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t4 = f32[4,2]{0,1} transpose(d4), dimensions={1,0}
  ROOT out = f32[2,3]{1,0} copy(x)
}
"""
"""Four sites no output reaches, printed in the reverse of their order: ``t1`` and ``t2`` at one
file and line (in two functions), ``t3`` at a file with no name, line 0, and ``t4`` with no
source and no op name."""


def test_sites_without_an_output_are_ordered_by_file_and_line_then_op_name():
    """No source sorts as file "" line 0; the function is no key; no op name sorts first."""
    assert [site.transpose for site in find_sites(read_hlo(ORDER))] == ["t4", "t3", "t2", "t1"]


TRIPS = """
HloModule jit_step

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  w = f32[3,4]{1,0} parameter(1)
  d = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/dot_general"}
  td = f32[4,2]{0,1} transpose(d), dimensions={1,0}
  init = (f32[2,3]{1,0}, f32[3,4]{1,0}) tuple(x, w)
  ROOT loop = (f32[2,3]{1,0}, f32[3,4]{1,0}) while(init), condition=cond, body=body
}

body {
  p = (f32[2,3]{1,0}, f32[3,4]{1,0}) parameter(0)
  a = f32[2,3]{1,0} get-tuple-element(p), index=0
  b = f32[3,4]{1,0} get-tuple-element(p), index=1
  e = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(step)/dot_general"}
  tl = f32[4,2]{0,1} transpose(e), dimensions={1,0}
  ROOT r = (f32[2,3]{1,0}, f32[3,4]{1,0}) tuple(a, b)
}

cond {
  c = (f32[2,3]{1,0}, f32[3,4]{1,0}) parameter(0)
  ROOT k = pred[] constant(true)
}
"""
"""The same forward dot and transpose twice, once in the entry and once in a loop of a trip
count no one can read."""


def test_sites_alike_but_for_their_trips_put_an_unknown_count_first():
    sites = find_sites(read_hlo(TRIPS))
    assert [(site.transpose, site.trips) for site in sites] == [("tl", None), ("td", 1)]


def test_a_site_that_runs_once_has_no_loop_count_on_its_line():
    site = TransposeSite("t", "f32[2,8]", "d", ("Sharding",), "f32[8,2]")
    assert str(site).endswith("  dot f32[8,2] -> Sharding -> transpose f32[2,8]")


LINES_AGAINST_NAMES = """
HloModule jit_step

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  w = f32[3,4]{1,0} parameter(1)
  d1 = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="b" source_file="m.py" source_line=1}
  t1 = f32[4,2]{0,1} transpose(d1), dimensions={1,0}
  d2 = f32[2,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="a" source_file="m.py" source_line=2}
  t2 = f32[4,2]{0,1} transpose(d2), dimensions={1,0}
  ROOT out = f32[2,3]{1,0} copy(x)
}
"""
"""Two sites no output reaches: ``t1`` on the earlier line, ``t2`` of the earlier op name."""


def test_the_source_line_orders_sites_before_the_op_name():
    """The op name breaks a tie of file and line only."""
    assert [site.transpose for site in find_sites(read_hlo(LINES_AGAINST_NAMES))] == ["t1", "t2"]


SITES_CHAIN = dot_then_transpose(
    's = f32[16,32]{1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}',
    "c = f32[16,32]{0,1} copy(s)",
    last="c",
)
"""A dot, then a ``Sharding`` call, then a copy, then the transpose."""


def test_a_sites_chain_reads_in_data_flow_order():
    """``between`` lists the op nearest the transpose first; the chain runs from the dot."""
    (site,) = find_sites(read_hlo(SITES_CHAIN))
    assert site.between == ("copy", "Sharding")
    assert site.chain == "dot f32[16,32] -> Sharding -> copy -> transpose f32[32,16]"
