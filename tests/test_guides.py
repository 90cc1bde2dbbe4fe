"""Every guide executes top to bottom in a fresh kernel."""

import pytest

from tests.guide_runner import execute_guide, guide_paths


@pytest.mark.parametrize("guide", guide_paths(), ids=lambda p: p.stem)
def test_guide_executes(guide):
    notebook = execute_guide(guide)
    assert any(cell.cell_type == "code" for cell in notebook.cells)
