"""The flagship's "Fix your own model" as a reader copies it: it runs with only JAX and Flax, and it
computes what the site's tested modules compute."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import jupytext
import numpy as np
import pytest

GUIDE = Path(__file__).resolve().parent.parent / "guides" / "shard_mode_performance.md"
SECTION = ("## Fix your own model", "## The barrier in plain JAX")
"""The section's heading and the next one."""
ALLOWED = {"jax", "flax", "numpy", *sys.stdlib_module_names}
"""The modules a reader with only ``jax`` and ``flax`` installed has."""
TESTED = (
    "from snippets.kernel_order_grad import auto_axes_dot_general\n"
    "from snippets.vocab_parallel import vocab_parallel_cross_entropy, vocab_parallel_logits\n"
)
"""The teaching modules' versions, in place of the page's plain-JAX cell."""
EPILOGUE = """
import json
print("RESULT", json.dumps({
    run: {
        "loss": losses[run],
        "sites": [
            {"output": site.output, "verdict": site.verdict, "shape": site.shape,
             "dot_shape": site.dot_shape, "between": list(site.between)}
            for site in lowered_sites(step)
        ],
    }
    for run, step in lowered.items()
}))
"""
"""Printed after the section's cells: each run's loss and every transpose-of-dot site."""
BLOCK = "import sys\nsys.modules['snippets'] = None  # from here on, importing snippets fails\n"
UNBLOCK = "del sys.modules['snippets']  # the check may use this project\n"
TOLERANCE = 512 * float(np.finfo(np.float32).eps)
"""Relative: a float32 sum over the 512-word vocabulary, reassociated, moves by at most this."""


def section_cells() -> list[str]:
    """The code cells of the section, in page order, as a reader copies them."""
    cells, inside = [], False
    for cell in jupytext.read(GUIDE).cells:
        if cell.cell_type == "markdown":
            inside = SECTION[0] in cell.source or (inside and SECTION[1] not in cell.source)
        elif inside:
            cells.append(cell.source)
    return cells


def imported_modules(code: str) -> set[str]:
    """The top-level names of the modules ``code`` imports."""
    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module.split(".")[0])
    return names


def split_cells() -> tuple[list[str], str]:
    """The reader's cells, then the check: the one cell that imports this project or its checker
    (``find_barriers``), the last."""
    cells = section_cells()
    project = [
        i for i, cell in enumerate(cells) if {"snippets", "find_barriers"} & imported_modules(cell)
    ]
    assert project == [len(cells) - 1], f"cells importing this project: {project} of {len(cells)}"
    return cells[:-1], cells[-1]


def run_section(swap_in_tested: bool) -> dict:
    """Run the section in a fresh ``python -I``, with this project unimportable until the check.

    ``swap_in_tested``: the plain-JAX cell (the one defining ``auto_axes_dot_general``) is
    replaced by imports of the teaching modules, and the project is importable throughout.
    """
    reader, check = split_cells()
    if swap_in_tested:
        reader = [TESTED if "def auto_axes_dot_general" in cell else cell for cell in reader]
        assert reader.count(TESTED) == 1
    else:
        reader = [BLOCK, *reader, UNBLOCK]
    script = "\n".join([*reader, check, EPILOGUE])
    done = subprocess.run(
        [sys.executable, "-I", "-c", script],
        capture_output=True,
        check=False,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    return json.loads(line.removeprefix("RESULT "))


@pytest.fixture(scope="module")
def page() -> dict:
    """Each run's loss and sites from the page's own code."""
    return run_section(swap_in_tested=False)


def test_what_a_reader_copies_imports_only_jax_flax_numpy_and_the_standard_library():
    reader, _ = split_cells()
    for cell in reader:
        assert imported_modules(cell) <= ALLOWED, cell


def test_the_recipe_runs_without_this_project_and_keeps_the_loss_on_both_meshes(page):
    meshes = {run.split(" fixed=")[0] for run in page}
    assert meshes == {"('fsdp',)", "('data', 'model')"}
    for mesh in meshes:
        unfixed, fixed = (page[f"{mesh} fixed={fixed}"]["loss"] for fixed in (False, True))
        assert fixed == pytest.approx(unfixed, rel=TOLERANCE)


def test_the_fixes_unblock_every_fold_on_both_meshes(page):
    for run, result in page.items():
        blocked = sorted(site["output"] for site in result["sites"] if site["between"])
        fixed = run.endswith("fixed=True")
        assert blocked == ([] if fixed else ["down.kernel", "head.kernel", "up.kernel"]), run
        assert result["sites"], run  # the folds are still there, unblocked


def test_the_page_and_the_tested_modules_give_the_same_loss_and_sites(page):
    tested = run_section(swap_in_tested=True)
    assert tested.keys() == page.keys()
    for run in [run for run in page if run.endswith("fixed=True")]:  # the runs that use them
        assert page[run]["loss"] == pytest.approx(tested[run]["loss"], rel=TOLERANCE), run
        assert page[run]["sites"] == tested[run]["sites"], run
