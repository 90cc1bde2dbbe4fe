"""Shapes read from HLO text: element counts, and one device's shard of a sharded array."""

import pytest

from find_barriers._program import Instruction
from find_barriers._shapes import elements_of, shard_bytes, shard_counts, shard_dims


def test_an_unknown_instruction_or_a_tuple_has_no_element_count():
    array = Instruction("a", "f32[8,4]{1,0}", "parameter", ("0",), "")
    pair = array._replace(shape="(f32[2], f32[2])")
    assert (elements_of(array), elements_of(pair), elements_of(None)) == (32, -1, -1)


def test_a_tuple_results_shard_is_its_first_arrays():
    """A tuple-shaped result (a custom call's, say) counts its first array, sharded as written."""
    inst = Instruction(
        "x", "(bf16[8,4]{1,0}, s32[])", "custom-call", (), ", sharding={devices=[2,1]<=[2]}"
    )
    assert (shard_dims(inst), shard_bytes(inst)) == ((4, 4), 2 * 16)


@pytest.mark.parametrize(
    ("sharding", "counts"),
    [
        ("sharding={mesh['data'=2], [{'model'}, {'data'}]}", (1, 2)),  # an axis the mesh omits
        ("sharding={mesh['data'=2], [{'data'}]}", (2, 1)),  # fewer dimensions than the array's
        ("sharding={devices=[4]<=[4]}", (4, 1)),
        ("sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}", (2, 1)),
    ],
)
def test_a_dimension_no_sharding_names_is_split_in_one(sharding, counts):
    assert shard_counts(sharding, 2) == counts
