"""What a reader sees of a guide is enough to follow it: no visible cell needs a hidden one."""

from __future__ import annotations

import ast
import builtins

import jupytext
import pytest

from tests.guide_runner import guide_paths

HIDDEN_TAGS = {"remove-cell", "remove-input"}
"""Cells whose code the rendered page does not show."""


def defined_names(tree: ast.AST) -> set[str]:
    """Every name a cell binds: assignments, loop and ``with`` targets, imports, defs, classes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            names.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) or (
            isinstance(node, ast.ExceptHandler) and node.name
        ):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def used_names(tree: ast.AST) -> set[str]:
    """Every name a cell reads."""
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def cells(path) -> list[tuple[bool, ast.AST]]:
    """Each code cell of a guide as (hidden, parsed code); IPython magics are left out."""
    notebook = jupytext.read(path)
    parsed = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        hidden = bool(HIDDEN_TAGS & set(cell.metadata.get("tags", [])))
        parsed.append((hidden, ast.parse(source)))
    return parsed


def names_only_hidden_cells_define(path) -> list[tuple[int, set[str]]]:
    """(visible cell number, names it uses that only hidden cells define), for each offender."""
    parsed = cells(path)
    shown = set(dir(builtins))
    for hidden, tree in parsed:
        if not hidden:
            shown |= defined_names(tree)
    only_hidden = set()
    for hidden, tree in parsed:
        if hidden:
            only_hidden |= defined_names(tree) - shown
    return [
        (number, used_names(tree) & only_hidden)
        for number, (hidden, tree) in enumerate(parsed, start=1)
        if not hidden and used_names(tree) & only_hidden
    ]


@pytest.mark.parametrize("guide", guide_paths(), ids=lambda p: p.stem)
def test_no_visible_cell_uses_a_name_only_a_hidden_cell_defines(guide):
    offenders = names_only_hidden_cells_define(guide)
    assert not offenders, "; ".join(
        f"{guide.name} code cell {number} uses {sorted(names)}, defined only in hidden cells"
        for number, names in offenders
    )


def test_the_check_finds_a_name_from_a_hidden_cell(tmp_path):
    guide = tmp_path / "guide.md"
    hidden = "```{code-cell} ipython3\n---\ntags: [remove-cell]\n---\nfrom x import table\n```\n"
    visible = "```{code-cell} ipython3\nrows = [1]\ntable(rows)\n```\n"
    header = guide_paths()[0].read_text().split("\n---\n", 1)[0]
    guide.write_text(f"{header}\n---\n\n# T\n\n{hidden}\n{visible}")
    assert names_only_hidden_cells_define(guide) == [(2, {"table"})]


def test_the_flagship_shows_the_barrier_in_plain_jax_first():
    guide = next(p for p in guide_paths() if p.stem == "shard_mode_performance")
    first = next(
        tree
        for hidden, tree in cells(guide)
        if not hidden and "dialect='hlo'" in ast.unparse(tree) and "import" in ast.unparse(tree)
    )
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(first)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert imported <= {"jax", "jax.numpy", "jax.sharding"}, imported


MEASURES = "## How this page measures"


def helpers_left_unnamed(path) -> list[str]:
    """The project modules a guide's cells import (``snippets``, ``find_barriers``) that its last
    section, "How this page measures", names neither as a module nor by an imported name."""
    text = path.read_text()
    section = text.rpartition(MEASURES)[2] if MEASURES in text else ""
    imports = [
        node
        for _, tree in cells(path)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    ]
    return sorted(
        {
            node.module
            for node in imports
            if node.module.split(".")[0] in ("snippets", "find_barriers")
            and node.module not in section
            and not any(alias.name in section for alias in node.names)
        }
    )


@pytest.mark.parametrize("guide", guide_paths(), ids=lambda p: p.stem)
def test_the_last_section_names_every_helper_the_page_calls(guide):
    headings = [line for line in guide.read_text().splitlines() if line.startswith("## ")]
    assert headings[-1] == MEASURES, f"{guide.name} ends with {headings[-1]!r}"
    assert helpers_left_unnamed(guide) == []


def test_a_helper_the_last_section_leaves_out_is_found(tmp_path):
    guide = tmp_path / "guide.md"
    cell = "```{code-cell} ipython3\nfrom snippets.hlo.counts import dot_flops\n```\n"
    header = guide_paths()[0].read_text().split("\n---\n", 1)[0]
    guide.write_text(f"{header}\n---\n\n# T\n\n{cell}\n{MEASURES}\n\nNothing named.\n")
    assert helpers_left_unnamed(guide) == ["snippets.hlo.counts"]
