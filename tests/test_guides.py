"""Every guide executes top to bottom in a fresh kernel."""

import pytest

from tests.guide_runner import GuideExecutionError, execute_guide, guide_paths


@pytest.mark.parametrize("guide", guide_paths(), ids=lambda p: p.stem)
def test_guide_executes(guide):
    notebook = execute_guide(guide)
    assert any(cell.cell_type == "code" for cell in notebook.cells)


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
