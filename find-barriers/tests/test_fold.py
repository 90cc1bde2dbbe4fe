"""XLA's fold conditions (``no_fold``) at their edges, on hand-written HLO: what may stand between,
the dot's operands, the transpose's order, and who else reads the dot's value."""

from __future__ import annotations

import pytest
from hlo_texts import dot_then_transpose

from find_barriers import Verdict, find_sites, read_hlo
from find_barriers._fold import no_fold
from find_barriers._program import parse_instruction


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
