"""Reading XLA's dumps: a module read twice is marked so, each error names its file, and what
tells StableHLO and a compiled module from the module JAX hands XLA."""

from __future__ import annotations

import re

import hlo_texts
import pytest

from conftest import DATA
from find_barriers._dumps import read_module, read_modules

WINDOW = 100_000
"""How many characters of a text are looked at for StableHLO's marks and a compiled module's."""


def write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_module_whose_text_an_earlier_file_had_is_marked_the_same_as_that_file(tmp_path):
    scanned = (DATA / "scanned.hlo.txt").read_text()
    first = write(tmp_path, "a.txt", scanned)
    other = write(tmp_path, "b.txt", (DATA / "scanned_fixed.hlo.txt").read_text())
    again = write(tmp_path, "c.txt", scanned)
    modules = read_modules([first, other, again, first])  # a path given twice is read once
    assert [(m.path, m.same_as) for m in modules] == [
        (first, None),
        (other, None),
        (again, first),
    ]


def test_a_module_read_alone_keeps_the_path_it_was_read_from(tmp_path):
    path = write(tmp_path, "step.txt", hlo_texts.SITES)
    assert (read_module(path).path, read_module(path).name) == (path, "jit_step")


CUT_MID_INSTRUCTION = hlo_texts.SITES[: hlo_texts.SITES.index("parameter(1)") + 10]

UNREADABLE = {
    "a directory": str,
    "a line cut off mid-instruction": lambda t: write(t, "cut.txt", CUT_MID_INSTRUCTION),
    "StableHLO": lambda t: write(t, "m.mlir", "module @jit_f {\n  func.func public @main() {\n"),
}


@pytest.mark.parametrize("case", UNREADABLE)
def test_each_error_of_reading_a_module_begins_with_its_path(tmp_path, case):
    path = UNREADABLE[case](tmp_path)
    with pytest.raises(ValueError, match=f"^{re.escape(path)}: "):
        read_module(path)


@pytest.mark.parametrize(
    "text",
    [
        "module @jit_f {\n  func.func public @main() {\n",
        "module @jit_f {\n}\n",  # its first line the only one MLIR has
    ],
)
def test_stablehlo_is_refused_as_such_and_not_as_a_file_cut_off(tmp_path, text):
    with pytest.raises(ValueError, match="StableHLO") as error:
        read_module(write(tmp_path, "m.mlir", text))
    assert "cut off" not in str(error.value)


BODY = "ENTRY main {\n  NAME = f32[8]{0} parameter(0)\n  ROOT t = f32[8]{0} negate(NAME)\n}\n"


def header(length: int, tail: str = "") -> str:
    """A module's first line ``length`` characters long, ending with ``tail``: a big module's,
    its entry computation's layout listing many parameters."""
    start, end = "HloModule m, entry_computation_layout={(", "f32[8]{0})->f32[8]{0}}"
    room = length - len(start) - len(end) - len(tail)
    return start + "f32[8]{0}, " * (room // 11) + end + " " * (room % 11) + tail


def mlir_mark_ending_at(end: int) -> str:
    """HLO whose instruction named ``module`` (a line MLIR has) ends at character ``end``."""
    body = BODY.replace("NAME", "module")
    return header(end - 2 - body.index("module") - len("module")) + "\n\n" + body


def scheduled_mark_ending_at(end: int) -> str:
    """HLO whose header's ``is_scheduled=true`` ends at character ``end``."""
    return header(end, ", is_scheduled=true") + "\n\n" + BODY.replace("NAME", "p")


@pytest.mark.parametrize("marked", [mlir_mark_ending_at, scheduled_mark_ending_at])
def test_only_the_first_100000_characters_are_looked_at_for_stablehlo_or_a_compiled_module(
    tmp_path, marked
):
    """A mark within them refuses the text; one a character further is not looked for."""
    assert marked(WINDOW)[:WINDOW].endswith(("module", "is_scheduled=true"))
    within = write(tmp_path, "within.txt", marked(WINDOW))
    with pytest.raises(ValueError, match=f"^{re.escape(within)}: "):
        read_module(within)
    assert read_module(write(tmp_path, "beyond.txt", marked(WINDOW + 1))).program.entry == "main"
