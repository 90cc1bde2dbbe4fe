"""Trip counts read from a ``while`` as written before optimisation (a counter that starts at a
constant, is compared with a constant and grows by a constant), and each way a loop says nothing."""

import pytest

from find_barriers._loops import loop_parts, run_counts, trip_count
from find_barriers._program import read_hlo

COUNTED = """HloModule m

body {
  bp = (s32[], f32[2]{0}) parameter(0)
  bi = s32[] get-tuple-element(bp), index=0
  bx = f32[2]{0} get-tuple-element(bp), index=1
  bs = s32[] constant(STEP)
  bn = s32[] add(bi, bs)
  ROOT bo = (s32[], f32[2]{0}) tuple(bn, bx)
}

cond {
  cp = (s32[], f32[2]{0}) parameter(0)
  ci = s32[] get-tuple-element(cp), index=0
  cb = s32[] constant(BOUND)
  ROOT cc = pred[] compare(ci, cb), direction=DIR
}

ENTRY main {
  x = f32[2]{0} parameter(0)
  s0 = s32[] constant(START)
  init = (s32[], f32[2]{0}) tuple(s0, x)
  ROOT loop = (s32[], f32[2]{0}) while(init), condition=cond, body=body
}
"""
"""A loop of counter ``bi``: from ``START``, while ``counter DIR BOUND``, by ``STEP`` a trip."""


def loop_text(start=0, bound=4, step=1, direction="LT", edits=()) -> str:
    """:data:`COUNTED` so filled in, then each ``(old, new)`` of ``edits`` replaced."""
    text = COUNTED
    for key, value in (("START", start), ("BOUND", bound), ("STEP", step), ("DIR", direction)):
        text = text.replace(key, str(value))
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text


def trips(*args, **kwargs) -> int | None:
    """The trip count of :func:`loop_text`'s loop."""
    program = read_hlo(loop_text(*args, **kwargs))
    return trip_count(program.by_name["loop"], program)


@pytest.mark.parametrize(
    ("start", "bound", "step", "direction", "expected"),
    [
        (0, 4, 1, "LT", 4),
        (2, 10, 1, "LT", 8),  # the span from the start, not from 0
        (0, 5, 2, "LT", 3),  # a last, short stride still runs
        (5, 2, 1, "LT", 0),  # the condition fails at once
        (0, 5, 2, "LE", 3),  # 0, 2, 4
        (0, 4, 2, "LE", 3),  # 0, 2, 4: the bound itself runs
        (7, 2, 1, "LE", 0),
        (0, 4, 1, "NE", 4),
        (0, 6, 3, "NE", 2),
        (3, 3, 1, "NE", 0),  # already at the bound
    ],
)
def test_a_counted_loop_runs_as_its_direction_bound_and_stride_say(
    start, bound, step, direction, expected
):
    """The count is an int, as a report prints it."""
    found = trips(start, bound, step, direction)
    assert (found, type(found)) == (expected, int)


@pytest.mark.parametrize(
    ("start", "bound", "step", "direction"),
    [
        (0, 5, 2, "NE"),  # steps over the bound: never equal, it never stops
        (6, 2, 2, "NE"),  # starts past the bound and moves away from it
        (0, 4, 0, "LT"),  # a stride of 0 never reaches the bound
        (4, 0, -1, "LT"),  # counting down under ``<``: it never stops
        (0, 4, 1, "GT"),  # ``counter > bound`` counting up: none or endless, not read
        (0, 4, 1, "EQ"),
    ],
)
def test_a_counted_loop_that_never_ends_or_is_not_read_has_no_trip_count(
    start, bound, step, direction
):
    assert trips(start, bound, step, direction) is None


@pytest.mark.parametrize(
    ("direction", "expected"),
    [("GT", 4), ("GE", 5), ("NE", 4), ("LT", None), ("LE", None)],
)
def test_a_bound_written_first_reads_the_comparison_the_other_way_round(direction, expected):
    """``bound > counter`` is ``counter < bound``; ``bound < counter`` is ``counter > bound``,
    which is not read (it was once taken for ``counter < bound``)."""
    swapped = [("compare(ci, cb)", "compare(cb, ci)")]
    assert trips(direction=direction, edits=swapped) == expected


WHAT_IS_NOT_A_COUNTER = {
    "a start from a parameter": [("s0 = s32[] constant(0)", "s0 = s32[] parameter(1)")],
    "a start not an integer": [("s0 = s32[] constant(0)", "s0 = f32[] constant(0.5)")],
    "a bound not an integer": [("cb = s32[] constant(4)", "cb = f32[] constant(2.5)")],
    "a stride read from the state": [("add(bi, bs)", "add(bi, bi)")],
    "a counter that goes down": [("add(bi, bs)", "subtract(bi, bs)")],
    "a counter set to a constant": [("bn = s32[] add(bi, bs)", "bn = s32[] constant(1)")],
    "a counter grown from another value": [("add(bi, bs)", "add(bs, bs)")],
    "a counter the module does not hold": [("tuple(bn, bx)", "tuple(gone, bx)")],
    "a compared value not of the state": [
        ("compare(ci, cb)", "compare(cn, cb)"),
        ("  ROOT cc", "  cn = s32[] negate(ci)\n  ROOT cc"),
    ],
    "a compared element of a tuple the condition makes": [
        ("get-tuple-element(cp)", "get-tuple-element(ct)"),
        ("  ci =", "  ct = (s32[], s32[]) tuple(cb, cb)\n  ci ="),
    ],
    "a compared element the state does not hold": [("(cp), index=0", "(cp), index=2")],
    "a condition that is no comparison": [
        (
            "compare(ci, cb), direction=LT",
            'custom-call(ci, cb), custom_call_target="less", backend_config="direction=LT"',
        )
    ],
    "a comparison with no direction": [(", direction=LT", "")],
    "a condition the module does not hold": [("condition=cond", "condition=gone")],
    "a body the module does not hold": [("body=body", "body=gone")],
    "a loop with no state": [("while(init)", "while()")],
}


@pytest.mark.parametrize("edits", WHAT_IS_NOT_A_COUNTER.values(), ids=WHAT_IS_NOT_A_COUNTER)
def test_a_loop_with_no_counter_read_as_one_has_no_trip_count(edits):
    """Each edit of a loop of 4 trips leaves one part of its counter unread: no count, no error
    (most are edited modules, not ones XLA writes)."""
    assert trips() == 4
    assert trips(edits=edits) is None


def test_a_loops_parts_are_read_from_its_attributes_not_its_metadata():
    """A ``body=`` in the op name is not the loop's body, nor a ``condition=``."""
    named = ("body=body", 'body=body, metadata={op_name="while body=cond condition=body"}')
    program = read_hlo(loop_text(edits=[named]))
    assert loop_parts(program.by_name["loop"]) == {"condition": "cond", "body": "body"}
    count = run_counts(program)
    assert (count("body"), count("cond")) == (4, 5)
