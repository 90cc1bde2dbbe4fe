"""The HLO readers on hand-written module text, including what they must not match."""

import pytest

from snippets.hlo import (
    collectives,
    group_size,
    instructions,
    opcode_counts,
    parse_instruction,
    shape_bytes,
)

COMPILED = """
HloModule jit_step, entry_computation_layout={(f32[2,1]{1,0})->f32[1,2]{1,0}}

%region_0.0 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add.0 = f32[] add(%x, %y)
}

ENTRY %main (p: f32[8,32]) -> f32[2,32] {
  %p = f32[8,32]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  %ar = f32[8,32]{1,0} all-reduce(%p), channel_id=1, replica_groups=[1,4]<=[4], to_apply=%region_0.0
  %rs = f32[2,32]{1,0} reduce-scatter(%p), channel_id=2, replica_groups={{0,1,2,3}}, dimensions={0}, to_apply=%region_0.0
  %ag = f32[8,32]{1,0} all-gather(%rs), channel_id=3, replica_groups=mesh['x'=4] {'x'}, dimensions={0}
  %ags = (f32[2,32]{1,0}, bf16[8,32]{1,0}) all-gather-start(%rs), channel_id=4, replica_groups={{0,1,2,3}}, dimensions={0}
  %agd = bf16[8,32]{1,0} all-gather-done(%ags)
  %t = (f32[2]{0}, s32[]) tuple(%p, %p)
  ROOT %ds = f32[2,32]{1,0} dynamic-slice(%ar, %c, %c), dynamic_slice_sizes={2,32}
}
"""


def test_parse_instruction_reads_tuple_shapes_and_operands():
    inst = parse_instruction('  %t = (f32[2]{0}, s32[]) tuple(%p, %q), metadata={op_name="x"}')
    assert inst.shape == "(f32[2]{0}, s32[])"
    assert inst.opcode == "tuple"
    assert inst.operands == ("p", "q")


@pytest.mark.parametrize(
    "line",
    [
        "HloModule jit_step",
        "ENTRY %main (p: f32[8,32]) -> f32[2,32] {",
        "}",
        "",
        "%region_0.0 (x: f32[]) -> f32[] {",
    ],
)
def test_non_instructions_are_not_parsed(line):
    assert parse_instruction(line) is None


def test_instructions_include_fused_computations():
    names = [inst.name for inst in instructions(COMPILED)]
    assert names[:3] == ["x", "y", "add.0"]
    assert "ds" in names


def test_shape_bytes():
    assert shape_bytes("f32[8,32]{1,0}") == 1024
    assert shape_bytes("(f32[2]{0}, bf16[4])") == 16
    assert shape_bytes("f32[]") == 4


def test_collectives_kinds_ranks_and_bytes():
    found = [(c.kind, c.ranks, c.bytes_per_rank) for c in collectives(COMPILED)]
    assert found == [
        ("all-reduce", 4, 1536),  # 2 * 3/4 * 1024
        ("reduce-scatter", 4, 768),  # 3/4 of the full 1024
        ("all-gather", 4, 768),
        ("all-gather", 4, 384),  # async start: the bf16 result counts
    ]


def test_no_collectives_in_a_module_without_them():
    assert collectives("%a = f32[2] add(%x, %y)\n%b = f32[2] all-reduce-done(%a)") == []


def test_group_size_rejects_what_it_cannot_read():
    with pytest.raises(ValueError, match="No replica_groups"):
        group_size("channel_id=1, dimensions={0}")


def test_opcode_counts_does_not_count_prefixes():
    counts = opcode_counts(COMPILED, "all-gather", "dynamic-slice", "slice")
    assert counts == {"all-gather": 1, "dynamic-slice": 1, "slice": 0}
