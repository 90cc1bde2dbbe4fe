"""The estimated cost of a blocked weight-gradient fold: relayout copies of the parameter and its
optimizer states (design doc §4.3), a lost reduce-scatter (§4.2), and none where the gradient is
summed first (§4.6) or stacked in a loop (§4.7)."""

import pytest
from hlo_texts import HEAD

from find_barriers._cost import measured_copy_bytes
from find_barriers._program import read_hlo
from find_barriers._shapes import shard_bytes
from find_barriers._sites import find_sites


def head_cost(emb: int, text: str = HEAD):
    (site,) = find_sites(read_hlo(text.replace("EMB", str(emb))))
    return site.cost


def test_the_parameter_and_two_moments_are_copied_in_and_out_a_shard_each():
    cost = head_cost(512)
    shard = 128 * 32000 * 2  # one device's quarter of the bf16 kernel
    assert (cost.relayout_copies, cost.relayout_copy_bytes) == (6, 2 * 6 * shard)
    assert cost.basis == ("4.3", "4.2")


@pytest.mark.parametrize(("emb", "lost"), [(512, 3 * 32000 * 512 * 2 // 4), (2048, 0)])
def test_a_reduce_scatter_is_lost_only_under_512_bytes_a_shard_minor_most(emb, lost):
    """At emb 512 a shard of the minor-most embedding is 128 bf16 = 256 bytes: under the gate,
    so a full all-reduce moves (N - 1) / N of the gradient more; at emb 2048, 1,024 bytes."""
    assert head_cost(emb).lost_reduce_scatter_bytes == lost


@pytest.mark.parametrize(("vocab", "copies"), [(32000, 0), (32768, 6)])
def test_no_copies_where_tpu_stores_the_shard_as_the_gradient_comes(vocab, copies):
    """Sharded on the vocabulary (tensor parallel), a shard of 8,000 columns fills no whole
    128-element tiles and its 512 rows do: TPU keeps it rows minor-most, as the gradient comes.
    8,192 columns fill them: stored row-major, copied in and out."""
    text = HEAD.replace("32000", str(vocab)).replace("devices=[4,1]<=[4]", "devices=[1,4]<=[4]")
    cost = head_cost(512, text)
    assert cost.relayout_copies == copies
    assert cost.basis == (("4.1",) if copies == 0 else ("4.3",))


def test_a_gradient_summed_with_another_contribution_first_costs_nothing():
    """A tied table: the head's gradient is added to the lookup's scatter before the update."""
    tied = HEAD.replace(
        "  m = bf16[EMB,32000]{1,0} add(mu, t)",
        "  z = bf16[EMB,32000]{1,0} broadcast(), dimensions={}\n"
        "  ids = s32[8,1]{1,0} parameter(5)\n"
        "  rows = bf16[8,32000]{1,0} parameter(6)\n"
        "  lookup = bf16[EMB,32000]{1,0} scatter(z, ids, rows), update_window_dims={1}, "
        "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
        "to_apply=main\n"
        "  grad = bf16[EMB,32000]{1,0} add(t, lookup)\n"
        "  m = bf16[EMB,32000]{1,0} add(mu, grad)",
    )
    cost = head_cost(512, tied)
    assert (cost.relayout_copy_bytes, cost.basis) == (0, ("4.6", "4.2"))
    assert cost.lost_reduce_scatter_bytes > 0  # summed first, still under §4.2's gate


def test_per_device_bytes_follow_both_sharding_spellings():
    text = HEAD.replace("EMB", "512")
    program = read_hlo(text)
    assert shard_bytes(program.by_name["w"]) == 128 * 32000 * 2
    shardy = text.replace(
        "w = bf16[512,32000]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}",
        "w = bf16[512,32000]{1,0} parameter(0), sharding={mesh['data'=1,'fsdp'=4], [{'fsdp'}, {}]}",
    )
    assert shard_bytes(read_hlo(shardy).by_name["w"]) == 128 * 32000 * 2


def test_measured_copies_are_the_entrys_read_and_written():
    compiled = """HloModule m, is_scheduled=true

%body (p: f32[8]) -> f32[8] {
  %p = f32[8]{0} parameter(0)
  ROOT %c = f32[8]{0:T(128)} copy(%p)
}

ENTRY %main (a: f32[128,32000]) -> f32[128,32000] {
  %a = f32[128,32000]{1,0:T(8,128)} parameter(0)
  %in = f32[128,32000]{0,1:T(8,128)} copy(%a)
  ROOT %out = f32[128,32000]{1,0:T(8,128)} copy(%in)
}
"""
    assert measured_copy_bytes(compiled) == 2 * 2 * 128 * 32000 * 4  # not the body's copy
