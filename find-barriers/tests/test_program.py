"""HLO text read as records: instructions, computations, tuple elements and stacks."""

import pytest
from hlo_texts import FRAMES, LOOP, SHORTHAND_LOOP

from find_barriers._program import Frame, instructions, parse_instruction, read_hlo
from find_barriers._shapes import shape_bytes

FUSED = """
%region_0.0 (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add.0 = f32[] add(%x, %y)
}

ENTRY %main (p: f32[8,32]) -> f32[8,32] {
  %p = f32[8,32]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  ROOT %ar = f32[8,32]{1,0} all-reduce(%p), channel_id=1, replica_groups=[1,4]<=[4], to_apply=%region_0.0
}
"""


def test_an_instruction_reads_its_shape_opcode_and_operands():
    inst = parse_instruction(
        '  %t = (f32[2]{0}, s32[]) tuple(%p, /*index=1*/%q), metadata={op_name="x"}'
    )
    assert (inst.name, inst.shape, inst.opcode, inst.operands) == (
        "t",
        "(f32[2]{0}, s32[])",
        "tuple",
        ("p", "q"),
    )


@pytest.mark.parametrize(
    "line",
    [
        "HloModule jit_step",
        "ENTRY %main (p: f32[8,32]) -> f32[2,32] {",
        "}",
        "",
        "%r (x: f32[]) -> f32[] {",
    ],
)
def test_other_lines_are_not_instructions(line):
    assert parse_instruction(line) is None


def test_every_computation_is_read_the_called_ones_too():
    assert [inst.name for inst in instructions(FUSED)] == ["x", "y", "add.0", "p", "ar"]
    program = read_hlo(FUSED)
    assert (program.entry, program.roots["region_0.0"]) == ("main", "add.0")


def test_shape_bytes_add_every_array():
    assert (shape_bytes("f32[8,32]{1,0}"), shape_bytes("(f32[2]{0}, bf16[4])")) == (1024, 16)


def test_a_line_cut_off_mid_instruction_is_an_error_naming_its_line():
    with pytest.raises(ValueError, match="line 3 is not a whole instruction"):
        read_hlo("ENTRY %main {\n  %a = f32[2] parameter(0)\n  %b = f32[2] add(%a, %")


def test_the_tuple_element_shorthand_reads_as_a_get_tuple_element():
    program = read_hlo(SHORTHAND_LOOP)
    element = program.by_name["carry#2"]
    assert (element.opcode, element.operands, element.shape) == (
        "get-tuple-element",
        ("carry",),
        "f32[3,2]{1,0}",
    )
    assert program.owner["carry#2"] == "body"
    assert [user.name for user, _ in program.users(("carry", 2))] == ["carry#2"]
    longhand = {i.opcode for i in read_hlo(LOOP).computations["body"]}
    assert longhand == {i.opcode for i in program.computations["body"]}


def test_an_element_of_what_is_not_a_tuple_is_an_error():
    with pytest.raises(ValueError, match="reads past the end of carry"):
        read_hlo(SHORTHAND_LOOP.replace("carry#2, carry#2", "carry#7, carry#2"))


def test_a_stack_reads_files_lines_and_functions_innermost_first():
    program = read_hlo(FRAMES)
    stack = program.stack(program.by_name["d"])
    assert stack == (
        Frame("/venv/lib/python3.12/site-packages/flax/nnx/nn/linear.py", 422, "Linear.__call__"),
        Frame("/home/me/train.py", 58, "<module>"),
    )
    assert str(stack[1]) == "/home/me/train.py:58"
    assert read_hlo("ENTRY main { ROOT x = f32[] constant(0) }").stacks == {}


def test_an_older_source_line_is_a_frame_without_a_function():
    line = 'ENTRY m { ROOT c = f32[] constant(0), metadata={source_file="/a/m.py" source_line=7} }'
    program = read_hlo(line.replace("{ ROOT", "{\n ROOT").replace("} }", "}\n}"))
    assert program.stack(program.by_name["c"]) == (Frame("/a/m.py", 7),)


def test_stablehlo_text_is_refused_with_what_to_pass():
    with pytest.raises(ValueError, match=r"StableHLO/MLIR text, not HLO; pass HLO text"):
        read_hlo("module @jit_step {\n  func.func public @main() {\n    return\n  }\n}\n")
