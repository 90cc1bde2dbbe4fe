"""XLA's fold conditions (``no_fold``) at their edges, on hand-written HLO: what may stand between,
the dot's operands, the transpose's order, and who else reads the dot's value; and the transpose
the simplifier keeps only for a wide operand (``swaps_wide_operands``), pinned where a
``Sharding`` call stands between a weight gradient's dot and it."""

from __future__ import annotations

import dataclasses

import pytest
from hlo_texts import WIDE_KERNELS, WIDE_SHARDING, dot_then_transpose, wide_gradient

from find_barriers import Role, Verdict, find_sites, read_hlo
from find_barriers._fold import free_dims, no_fold, swaps_wide_operands
from find_barriers._program import parse_instruction
from find_barriers._rules import rule_of
from find_barriers._sites import value_source


def site_of(text: str):
    (site,) = find_sites(read_hlo(text))
    return site


COPY = "c = f32[16,32]{0,1} copy(d)"
BITCAST = "c = f32[16,32]{1,0} bitcast(d)"
SHARDING = (
    's = f32[16,32]{1,0} custom-call(c), custom_call_target="Sharding", sharding={replicated}'
)


@pytest.mark.parametrize(
    ("ops", "last", "verdict"),
    [
        ((COPY,), "c", Verdict.FOLDABLE),
        ((BITCAST, SHARDING), "s", Verdict.BLOCKED),
        (("c = f32[16,32]{1,0} reshape(d)",), "c", Verdict.KEPT),
    ],
)
def test_a_copy_or_bitcast_between_leaves_the_fold_to_the_dot(ops, last, verdict):
    """A copy or bitcast changes nothing the simplifier looks at; a reshape does."""
    assert site_of(dot_then_transpose(*ops, last=last)).verdict is verdict


def test_a_custom_call_other_than_sharding_between_keeps_the_transpose():
    """Only the ``Sharding`` calls are taken away: any other custom call still stands between."""
    program = read_hlo(dot_then_transpose(COPY, last="c"))
    kernel = parse_instruction('k = f32[16,32]{1,0} custom-call(d), custom_call_target="Kernel"')
    transpose, dot = program.by_name["t"], program.by_name["d"]
    sharding = parse_instruction(SHARDING.replace("(c)", "(d)"))
    assert no_fold(program, transpose, [sharding], dot) is None
    assert no_fold(program, transpose, [kernel], dot) is not None
    assert no_fold(program, transpose, [sharding, kernel], dot) is not None


BATCHED = """HloModule m

ENTRY main {
  a = f32[4,8,16]{2,1,0} parameter(0)
  b = f32[4,8,32]{2,1,0} parameter(1)
  d = f32[4,16,32]{2,1,0} dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}
  s = f32[4,16,32]{2,1,0} custom-call(d), custom_call_target="Sharding", sharding={replicated}
  ROOT t = SHAPE transpose(s), dimensions={ORDER}
}
"""


@pytest.mark.parametrize(
    ("order", "shape", "verdict"),
    [
        ("0,2,1", "f32[4,32,16]{1,2,0}", Verdict.BLOCKED),
        ("1,0,2", "f32[16,4,32]{2,0,1}", Verdict.KEPT),
        ("2,1,0", "f32[32,16,4]{0,1,2}", Verdict.KEPT),
    ],
)
def test_a_transpose_folds_only_when_it_swaps_the_last_two_dimensions(order, shape, verdict):
    """A batched dot's transpose keeps the batch dimension first, or is kept (its order named)."""
    site = site_of(BATCHED.replace("ORDER", order).replace("SHAPE", shape))
    assert site.verdict is verdict
    assert site.no_fold is None or f"{{{order}}}" in site.no_fold


def test_a_dot_operand_the_module_does_not_hold_is_judged_by_the_other_side():
    """A cut-out module: an operand with no instruction has an unknown rank, so only the other
    side's count of non-contracting dimensions decides."""
    unknown = dot_then_transpose(COPY, last="c").replace("  a = f32[8,16]{1,0} parameter(0)\n", "")
    assert site_of(unknown).verdict is Verdict.FOLDABLE
    wide = unknown.replace("f32[8,32]{1,0} parameter(1)", "f32[8,4,8]{2,1,0} parameter(1)")
    assert site_of(wide).verdict is Verdict.KEPT


def test_a_sparse_dots_third_operand_is_not_a_side():
    """A sparse dot reads its sparsity metadata as a third operand: the two sides decide alone."""
    sparse = dot_then_transpose(COPY, last="c").replace(
        "dot(a, b), lhs_contracting_dims={0}",
        "dot(a, b, meta), lhs_contracting_dims={0}",
    )
    sparse = sparse.replace("  d =", "  meta = u16[8,2]{1,0} parameter(2)\n  d =")
    assert site_of(sparse).verdict is Verdict.FOLDABLE


TUPLED = [
    "p = (f32[16,32]{1,0}, f32[8,16]{1,0}) tuple(d, a)",
    "e = f32[16,32]{1,0} get-tuple-element(p), index=0",
]


@pytest.mark.parametrize(
    ("other", "verdict"),
    [
        (None, Verdict.FOLDABLE),
        ("o = f32[8,16]{1,0} get-tuple-element(p), index=1", Verdict.FOLDABLE),
        ("n = f32[16,32]{1,0} negate(e)", Verdict.KEPT),
        ("e2 = f32[16,32]{1,0} get-tuple-element(p), index=0", Verdict.KEPT),
        ("k = ((f32[16,32]{1,0}, f32[8,16]{1,0})) tuple(p)", Verdict.KEPT),
        ("n = f32[16,32]{1,0} negate(d)", Verdict.KEPT),
    ],
)
def test_a_tuple_between_hides_no_other_reader_of_the_dots_value(other, verdict):
    """With the tuple forwarded, whoever reads its element, the element got, or the tuple whole
    reads the dot: a second reader keeps the transpose; the tuple's other element does not."""
    ops = [*TUPLED, *([other] if other else [])]
    assert site_of(dot_then_transpose(*ops, last="e")).verdict is verdict


def test_a_tuple_element_holding_a_value_between_counts_its_readers():
    """The tuple holds the ``Sharding`` call's result, not the dot's: a second reader of that
    element still reads the dot's value and keeps the transpose."""
    sharded = SHARDING.replace("(c)", "(d)")
    tupled = [sharded, *(op.replace("tuple(d, a)", "tuple(s, a)") for op in TUPLED)]
    assert site_of(dot_then_transpose(*tupled, last="e")).verdict is Verdict.BLOCKED
    second = "e2 = f32[16,32]{1,0} get-tuple-element(p), index=0"
    assert site_of(dot_then_transpose(*tupled, second, last="e")).verdict is Verdict.KEPT


def test_the_side_with_more_than_one_non_contracting_dimension_is_the_one_named():
    """Each side is read with its own attributes: a wide rhs is named as the rhs."""
    wide = dot_then_transpose(COPY, last="c").replace(
        "f32[8,32]{1,0} parameter(1)", "f32[8,4,8]{2,1,0} parameter(1)"
    )
    reason = site_of(wide).no_fold
    assert "rhs" in reason
    assert "lhs" not in reason


def wide_arguments(text: str) -> tuple:
    """What ``swaps_wide_operands`` is asked of a module's one transpose ``t``: the program,
    the transpose, the ops between and the dot."""
    program = read_hlo(text)
    transpose = program.by_name["t"]
    chain, dot = value_source(transpose, program.by_name)
    return program, transpose, chain, dot


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        (BATCHED.replace("ORDER", "0,2,1").replace("SHAPE", "f32[4,32,16]{1,2,0}"), None),
        (
            dot_then_transpose(COPY, last="c").replace("  a = f32[8,16]{1,0} parameter(0)\n", ""),
            None,
        ),
        (dot_then_transpose(SHARDING.replace("(c)", "(d)"), last="s"), (1, 1)),
        (wide_gradient("query", WIDE_SHARDING, last="s"), (2, 1)),
        (wide_gradient("out", WIDE_SHARDING, last="s"), (1, 2)),
        (wide_gradient("query", WIDE_SHARDING, last="s", batch=True), None),
    ],
    ids=["batched", "unknown rank", "canonical", "query", "out", "query batched"],
)
def test_free_dims_counts_each_sides_non_contracting_dimensions(text, counts):
    """lhs first; a dot with batch dimensions, or an operand the module does not hold (its rank
    unknown), has no count; the wide operand is the query's lhs and the output projection's rhs.
    A canonical dot, one each, swaps no wide operands."""
    program, transpose, chain, dot = wide_arguments(text)
    assert free_dims(program, dot) == counts
    assert swaps_wide_operands(program, transpose, chain, dot) is (counts in ((2, 1), (1, 2)))


def test_an_operand_that_is_a_tuple_has_no_count():
    """An operand of several arrays (no dot XLA writes) has no single rank to count."""
    text = wide_gradient("query", WIDE_SHARDING, last="s").replace(
        "b = bf16[2,4,512] parameter(4)", "b = (bf16[2,4,512], bf16[2]) parameter(4)"
    )
    program, transpose, chain, dot = wide_arguments(text)
    assert free_dims(program, dot) is None
    assert not swaps_wide_operands(program, transpose, chain, dot)


def test_a_dot_of_one_operand_has_no_count():
    """A dot with one operand (none XLA writes) has no count for a side it lacks."""
    program, _, _, dot = wide_arguments(wide_gradient("query", WIDE_SHARDING, last="s"))
    assert free_dims(program, dot._replace(operands=dot.operands[:1])) is None


def test_only_sharding_calls_and_ops_that_change_nothing_may_stand_between_a_wide_swap():
    """As for the fold: a custom call other than ``Sharding`` (the sites never hold one: the
    search for a dot stops there) or an op that changes the value stands in the way."""
    program, transpose, (sharding,), dot = wide_arguments(
        wide_gradient("query", WIDE_SHARDING, last="s")
    )
    kernel = parse_instruction('k = bf16[8,128,512] custom-call(s), custom_call_target="Kernel"')
    negate = parse_instruction("n = bf16[8,128,512] negate(s)")
    copy = parse_instruction("c = bf16[8,128,512] copy(s)")
    assert swaps_wide_operands(program, transpose, [copy, sharding], dot)
    assert not swaps_wide_operands(program, transpose, [kernel, sharding], dot)
    assert not swaps_wide_operands(program, transpose, [negate, sharding], dot)


def wide_site(kernel: str, *ops: str, last: str = "s", **options):
    """The one site of :func:`~hlo_texts.wide_gradient` ``kernel``, a ``Sharding`` call
    between unless ``ops`` say what stands there."""
    return site_of(wide_gradient(kernel, *(ops or (WIDE_SHARDING,)), last=last, **options))


@pytest.mark.parametrize("kernel", WIDE_KERNELS)
def test_a_wide_weight_gradient_behind_a_sharding_call_is_pinned_and_fb001(kernel):
    """The query's and the output projection's gradients: the simplifier keeps each transpose
    for its wide operand, and the ``Sharding`` call between pins it: a finding, of FB001
    (their cost is :mod:`test_cost`'s); a copy or a tuple between changes nothing."""
    site = wide_site(kernel)
    assert (site.verdict, site.blocked, site.wide_swap) == (Verdict.PINNED, True, True)
    assert (site.role, site.no_fold.startswith("the dot's ")) == (Role.WEIGHT_GRADIENT, True)
    assert rule_of(site).code == "FB001"
    copied = wide_site(kernel, WIDE_SHARDING, "c = bf16[DOT] copy(s)", last="c")
    tupled = wide_site(
        kernel,
        WIDE_SHARDING,
        "p = (bf16[DOT], bf16[2,4,512]) tuple(s, a)",
        "e = bf16[DOT] get-tuple-element(p), index=0",
        last="e",
    )
    assert copied.verdict is tupled.verdict is Verdict.PINNED


def as_activation_gradient(text: str) -> str:
    """``text`` with the update reading the moment where it read the transpose: the gradient
    reaches no output and no forward dot names its parameter."""
    return text.replace("add(mu, t)", "add(mu, mu)").replace("multiply(t, t)", "multiply(mu, mu)")


OTHER_ORDER = {"query": WIDE_KERNELS["out"][2], "out": WIDE_KERNELS["query"][2]}
"""Each kernel's transpose order put on the other's dot: the block swap of the other split of
three dimensions (one and two, not two and one), so not this dot's rhs dimensions before its lhs
ones."""


@pytest.mark.parametrize("kernel", WIDE_KERNELS)
@pytest.mark.parametrize(
    ("ops", "last", "options", "wide"),
    [
        ((), "d", {}, True),
        ((WIDE_SHARDING, "r = bf16[DOT] reshape(s)"), "r", {}, False),
        ((WIDE_SHARDING,), "s", {"batch": True}, False),
        ((WIDE_SHARDING,), "s", {"order": (2, 1, 0)}, False),
        ((WIDE_SHARDING,), "s", {"order": "other"}, False),
        ((WIDE_SHARDING, "o = bf16[DOT] negate(d)"), "s", {}, False),
        ((WIDE_SHARDING, "o = bf16[DOT] negate(s)"), "s", {}, False),
    ],
    ids=[
        "no Sharding call",
        "a reshape between",
        "batch dimensions",
        "reversed",
        "the other split's swap",
        "the dot has another user",
        "the Sharding call has another user",
    ],
)
def test_a_wide_gradient_is_kept_unless_only_a_sharding_call_stands_before_the_block_swap(
    kernel, ops, last, options, wide
):
    """Each thing but the ``Sharding`` call that keeps the transpose, or an order that is not
    the rhs dimensions before the lhs ones, leaves the site kept, no finding; with no call
    between, the swap is there, but nothing pins it."""
    if options.get("order") == "other":
        options = {"order": OTHER_ORDER[kernel]}
    site = site_of(wide_gradient(kernel, *ops, last=last, **options))
    assert (site.verdict, site.blocked, site.wide_swap) == (Verdict.KEPT, False, wide)
    assert (site.role, rule_of(site)) == (Role.WEIGHT_GRADIENT, None)


@pytest.mark.parametrize("kernel", WIDE_KERNELS)
def test_only_a_weight_gradient_is_pinned(kernel):
    """The same dot and swap as an activation gradient (no output reached, no parameter), or
    of a role unknown, stays kept: only a parameter's layout is pinned."""
    text = as_activation_gradient(wide_gradient(kernel, WIDE_SHARDING, last="s"))
    site = site_of(text)
    assert (site.role, site.parameter, site.wide_swap) == (Role.ACTIVATION_GRADIENT, None, True)
    assert (site.verdict, site.blocked, rule_of(site)) == (Verdict.KEPT, False, None)
    unknown = dataclasses.replace(wide_site(kernel), role=Role.UNKNOWN)
    assert (unknown.verdict, unknown.blocked) == (Verdict.KEPT, False)
