"""HLO text read as records: instructions, computations, tuple elements and stacks."""

import pytest
from hlo_texts import FRAMES, LOOP, SHORTHAND_LOOP

from find_barriers._program import (
    Frame,
    Instruction,
    instructions,
    is_sharding_call,
    mapped,
    parse_instruction,
    passes_on,
    read_hlo,
)
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


def test_the_attributes_follow_a_bracketed_result_and_names_are_read_whole():
    """After a tuple result the operand list's end is found exactly, and no letter is stripped
    from a name."""
    inst = parse_instruction(
        '  %t = (f32[2]{0}, s32[]) tuple(%Xp, /*index=1*/%q), metadata={op_name="x"}'
    )
    assert (inst.operands, inst.attributes) == (("Xp", "q"), ', metadata={op_name="x"}')


def test_a_line_cut_off_as_its_operand_list_opens_is_an_error():
    """``%b = add(`` is a line cut off, as ``%b = f32[2] add(`` is: not a line to skip."""
    for cut in ("  %b = f32[2] add(", "  %b = add("):
        with pytest.raises(ValueError, match="line 3 is not a whole instruction"):
            read_hlo(f"ENTRY %main {{\n  %a = f32[2] parameter(0)\n{cut}\n}}")


@pytest.mark.parametrize("operand", ["", "w", "%p"])
def test_a_parameter_with_no_number_is_an_error_naming_its_line(operand):
    """A parameter is found by its number, so one without is refused where it is read."""
    with pytest.raises(ValueError, match="line 2: a parameter with no number"):
        read_hlo(f"ENTRY %main {{\n  ROOT %a = f32[2] parameter({operand})\n}}")


def _wide_tuple(elements: int) -> str:
    """A tuple shape of ``elements`` arrays as XLA prints a long one: ``/*index=5*/`` every fifth
    element, and one comma written without its space."""
    shapes = [
        f"{f'/*index={n}*/' if n and n % 5 == 0 else ''}f32[{n}]{{0}}" for n in range(elements)
    ]
    return "(" + ", ".join(shapes[:2]) + "," + ", ".join(shapes[2:]) + ")"


def test_each_element_read_has_its_elements_shape_and_follows_its_tuple_in_index_order():
    """``p#10``, ``p#2`` and ``p#5`` read as three records after ``p``, by index, each of its own
    element's shape (a comment or a missing space in the tuple's shape changes none)."""
    program = read_hlo(
        f"ENTRY main {{\n  p = {_wide_tuple(11)} parameter(0)\n"
        "  ROOT r = (f32[10]{0}, f32[2]{0}, f32[5]{0}) tuple(p#10, p#2, p#5)\n}\n"
    )
    records = program.computations["main"]
    assert [(inst.name, inst.shape) for inst in records] == [
        ("p", _wide_tuple(11)),
        ("p#2", "f32[2]{0}"),
        ("p#5", "f32[5]{0}"),
        ("p#10", "f32[10]{0}"),
        ("r", "(f32[10]{0}, f32[2]{0}, f32[5]{0})"),
    ]
    shorthand = read_hlo(SHORTHAND_LOOP).by_name
    assert (shorthand["carry#0"].shape, shorthand["carry#1"].shape) == (
        "s32[]",
        "f32[2,2,3]{2,1,0}",
    )


@pytest.mark.parametrize(
    "read",
    [
        "carry#3",  # one past the last of its three elements
        "one#0",  # an element of an array
        "gone#0",  # an element of nothing in this computation
        "carry#1#0",  # an element of an element: HLO reads the tuple, not this
    ],
)
def test_an_element_read_of_no_tuple_element_is_an_error(read):
    with pytest.raises(ValueError, match=f"^{read} reads "):
        read_hlo(SHORTHAND_LOOP.replace("add(carry#0, one)", f"add(carry#0, {read})"))


STACK_TABLES = """
HloModule jit_step

FileNames
1 "/home/me/model.py"

FunctionNames
1 "XLayer.__call__"

FileLocations
1 {file_name_id=1 function_name_id=1 line=5 end_line=5 column=4 end_column=20}
2 {file_name_id=9 function_name_id=1 line=6 end_line=6 column=4 end_column=20}
3 {file_name_id=1 line=7 end_line=7 column=4 end_column=20}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}
3 {file_location_id=3 parent_frame_id=3}
4 {file_location_id=8 parent_frame_id=1}
5 {file_location_id=3}


ENTRY main {
  a = f32[2]{0} parameter(0), metadata={op_name="a" stack_frame_id=3}
  b = f32[2]{0} negate(a), metadata={op_name="b" stack_frame_id=99}
  ROOT c = f32[2]{0} negate(b), metadata={op_name="c" source_file="/srv/a/m.py" source_line=3}
}
"""
"""Stack frame tables with what a reader must not invent: a file, a function, a location or a
parent no table row gives, and a frame id no row has."""


def test_a_stack_frame_tables_missing_entries_read_as_unknown():
    """A missing file is ``?``, a missing function ``""``, a missing location ``?:0``, a missing
    parent ends the stack, and a frame id without a row is no stack."""
    program = read_hlo(STACK_TABLES)
    model, unknown_file = (
        Frame("/home/me/model.py", 5, "XLayer.__call__"),
        Frame("?", 6, "XLayer.__call__"),
    )
    assert program.stacks == {
        1: (model,),
        2: (unknown_file, model),
        3: (Frame("/home/me/model.py", 7, ""), unknown_file, model),
        4: (Frame("?", 0),),
        5: (Frame("/home/me/model.py", 7, ""),),
    }
    assert program.stack(program.by_name["b"]) == ()


def test_frame_ids_taken_as_they_stand_when_no_frame_names_itself():
    """Where no row names itself as parent, a parent id is the row's own id and 0 is none."""
    tables = (
        STACK_TABLES.split("StackFrames", maxsplit=1)[0]
        + "StackFrames\n1 {file_location_id=1 parent_frame_id=0}\n2 {file_location_id=3 parent_frame_id=1}\n"
    )
    stacks = read_hlo(tables).stacks
    assert stacks[2] == (
        Frame("/home/me/model.py", 7, ""),
        Frame("/home/me/model.py", 5, "XLayer.__call__"),
    )


def test_path_map_maps_an_older_source_file_too():
    program = read_hlo(STACK_TABLES, path_map=[("/srv/a", "/ci")])
    assert program.stack(program.by_name["c"]) == (Frame("/ci/m.py", 3),)


@pytest.mark.parametrize(
    ("path", "recorded", "local", "expected"),
    [
        ("/srv/a/m.py", "/srv/a", "/ci", "/ci/m.py"),
        ("/srv/a", "/srv/a", "/ci", "/ci"),  # the folder itself
        ("/srv/ab/m.py", "/srv/a", "/ci", "/srv/ab/m.py"),  # not a whole folder name
        ("/srv/a/m.py", "/srv/a/", "/ci", "/ci/m.py"),  # recorded with its slash
        ("/home/me/m.py", "/srv/", "/ci", "/home/me/m.py"),  # another folder altogether
        ("/home/tpu/Xformer/m.py", "/home/tpu", "/mnt/BOX/", "/mnt/BOX/Xformer/m.py"),
    ],
)
def test_a_path_is_mapped_by_whole_folder_names(path, recorded, local, expected):
    assert mapped(path, [(recorded, local)]) == expected


def test_text_outside_any_computation_is_kept_under_no_name():
    """No ``HloModule`` line, no computation: the module's name and entry are ``""``, and its
    instructions sit under ``""``; a line that begins with a number is not a table's row here."""
    program = read_hlo("1 x\nc = f32[] constant(0)\n")
    assert (program.name, program.entry, list(program.computations)) == ("", "", [""])
    assert [inst.name for inst in program.computations[""]] == ["c"]


def test_a_computation_header_may_end_in_spaces():
    program = read_hlo("ENTRY main {  \n  ROOT c = f32[] constant(0)\n}\n")
    assert (program.entry, program.roots) == ("main", {"main": "c"})


@pytest.mark.parametrize(("offset", "refused"), [(100_000 - 7, True), (100_000 - 6, False)])
def test_mlir_is_looked_for_in_the_first_100000_characters(offset, refused):
    """A line of MLIR that ends within them refuses the text; past them the text is read."""
    text = " " * offset + "\nmodule @m {\n}\n"
    if refused:
        with pytest.raises(ValueError, match="StableHLO/MLIR text"):
            read_hlo(text)
    else:
        assert read_hlo(text).computations == {}
    with pytest.raises(ValueError, match="StableHLO/MLIR text"):
        read_hlo("module @m {\n}\n")  # on the very first line


ALIASED = """HloModule jit_step, input_output_alias={ {}: (1, {}, may-alias) }

ENTRY main {
  a = f32[2]{0} parameter(0)
  b = f32[2]{0} parameter(1)
  ROOT c = f32[2]{0} custom-call(a, b), custom_call_target="k", output_to_operand_aliasing={{}: (0, {})}
}
"""


def test_the_aliases_are_the_module_lines_only():
    """A single output's alias ``{}`` is output 0; a custom call's own operand aliasing, further
    down, is no donated parameter."""
    assert read_hlo(ALIASED).aliases == {0: 1}


def test_callees_are_named_by_attributes_not_metadata():
    program = read_hlo(
        "ENTRY main {\n  p = pred[] parameter(0)\n  x = f32[] parameter(1)\n"
        "  k = f32[] conditional(p, x, x), branch_computations={%XA, %BX}\n"
        '  ROOT c = f32[] call(k), to_apply=f, metadata={op_name="jit(step)/calls=g"}\n}\n'
    )
    assert [inst.name for _, inst in program.callers_of("XA")] == ["k"]
    assert [inst.name for _, inst in program.callers_of("BX")] == ["k"]
    assert ([inst.name for _, inst in program.callers_of("f")], program.callers_of("g")) == (
        ["c"],
        [],
    )


def test_only_a_custom_call_is_a_sharding_call():
    """An attribute that names the ``Sharding`` target on another op makes it no pass-through."""
    attributes = ', custom_call_target="Sharding"'
    negate = Instruction("n", "f32[2]", "negate", ("d",), attributes)
    assert (is_sharding_call(negate), passes_on(negate)) == (False, False)
    assert is_sharding_call(negate._replace(opcode="custom-call"))
