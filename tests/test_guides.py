"""Every guide executed top to bottom: in this run's site build, or in an earlier one whose
inputs (code, imported modules, files read, packages) were the same."""

import nbformat
import pytest

from tests.guide_runner import GuideExecutionError, execute_guide, guide_paths


def _allowed_to_raise(cell: nbformat.NotebookNode) -> bool:
    return "raises-exception" in cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("guide", guide_paths(), ids=lambda p: p.stem)
def test_guide_executes(built_site, guide):
    notebook = nbformat.read(built_site.executed_notebook(guide), as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code_cells, f"{guide.name} has no code cells"
    executions = built_site.log.count(f"{guide.relative_to(guide.parents[1])}: Executing notebook")
    assert executions <= 1, f"{guide.name} executed {executions} times in the one site build"
    for index, cell in enumerate(code_cells):
        assert cell.execution_count is not None, f"{guide.name}: code cell {index} did not run"
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        assert _allowed_to_raise(cell) or not errors, f"{guide.name}: code cell {index} failed"


def test_a_failing_cell_names_the_guide_and_the_cell(tmp_path):
    broken = tmp_path / "broken_guide.md"
    header = guide_paths()[0].read_text().split("\n---\n", 1)[0]  # a real guide's jupytext header
    cells = (
        "# Broken\n\n```{code-cell} ipython3\nx = 1\n```\n\n```{code-cell} ipython3\n1 / 0\n```\n"
    )
    broken.write_text(f"{header}\n---\n\n{cells}")
    with pytest.raises(
        GuideExecutionError, match=r"guide broken_guide\.md: notebook cell 2 failed"
    ):
        execute_guide(broken)
