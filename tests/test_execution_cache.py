"""A guide executes again only when what it reads changed, and a failing cell names its guide.

Each test builds a small project of its own with ``docs/_ext/execution_cache.py``: two
notebooks, each importing one module of a package beside them.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from jupyter_cache import get_cache

import execution_cache
from tests.guide_runner import guide_paths
from tests.sphinx_project import build_project

HEADER = guide_paths()[0].read_text().split("\n---\n", 1)[0] + "\n---\n"
"""A real guide's jupytext header: what makes a Markdown file a notebook."""


def notebook(title: str, code: str) -> str:
    return f"{HEADER}\n# {title}\n\n```{{code-cell}} ipython3\n{code}\n```\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """``docs/first.md`` prints ``parts.first.VALUE``, ``docs/second.md`` ``parts.second.VALUE``."""
    source = tmp_path / "source"
    (source / "parts").mkdir(parents=True)
    (source / "parts" / "__init__.py").write_text("")
    (source / "docs").mkdir()
    for name in ("first", "second"):
        (source / "parts" / f"{name}.py").write_text(f"VALUE = '{name} 1'\n")
        code = f"from parts.{name} import VALUE\n\nprint(VALUE)"
        (source / "docs" / f"{name}.md").write_text(notebook(name.title(), code))
    toctree = "```{toctree}\nfirst\nsecond\n```\n"
    (source / "docs" / "index.md").write_text(f"# Index\n\n{toctree}")
    return tmp_path


def build(project: Path) -> subprocess.CompletedProcess:
    """Build ``project/source`` with the extension; its execution cache is ``project/cache``."""
    settings = 'root_doc = "docs/index"\nnb_execution_mode = "cache"\n'
    settings += f"nb_execution_cache_path = {str(project / 'cache')!r}\n"
    environment = os.environ | {"PYTHONPATH": str(project / "source")}  # where kernels find parts
    source, out = project / "source", project / "out"
    return build_project(source, out, [execution_cache], settings, "-b", "dummy", env=environment)


def executed(log: str) -> list[str]:
    """The notebooks a build's log says it executed, in order."""
    return re.findall(r"([\w.]+\.md): Executing notebook", log)


def printed(project: Path, name: str) -> str:
    """What the cached execution of ``docs/NAME.md`` printed."""
    uri = str(project / "source" / "docs" / f"{name}.md")
    (record,) = [r for r in get_cache(project / "cache").list_cache_records() if r.uri == uri]
    cells = get_cache(project / "cache").get_cache_bundle(record.pk).nb.cells
    return "".join(output["text"] for output in cells[0]["outputs"])


def test_only_the_notebook_that_imports_an_edited_module_executes_again(project):
    first = build(project)
    assert first.returncode == 0, first.stderr
    assert sorted(executed(first.stdout)) == ["first.md", "second.md"]

    (project / "source" / "parts" / "second.py").write_text("VALUE = 'second 2'\n")
    second = build(project)
    assert second.returncode == 0, second.stderr
    assert executed(second.stdout) == ["second.md"]
    assert "second.md: Executing notebook (changed: parts/second.py)" in second.stdout
    assert (printed(project, "first"), printed(project, "second")) == ("first 1\n", "second 2\n")

    third = build(project)
    assert executed(third.stdout) == []


def test_a_failing_cell_fails_the_build_and_names_the_notebook(project):
    (project / "source" / "parts" / "first.py").write_text("VALUE = 1 / 0\n")
    result = build(project)
    assert result.returncode != 0
    assert "docs/first.md: WARNING: Executing notebook failed: CellExecutionError" in result.stderr
    assert "ZeroDivisionError" in result.stderr
    assert re.search(r"threw an exception \(exception: \S+/docs/first\.md\)", result.stderr)


def test_the_log_names_the_first_three_changed_inputs_and_counts_the_rest():
    before = dict.fromkeys("pqrstu", "a")
    after = before | {"u": "b", "t": "b", "s": "b", "r": "b"} | {"v": "a"}
    assert execution_cache._changed(after, before) == "r, s, t and 2 more"
