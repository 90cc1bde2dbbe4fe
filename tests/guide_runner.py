"""Execute MyST guides in fresh kernels, for the tests and for ``nox -s notebooks``.

Usage: ``python tests/guide_runner.py --out _build/notebooks [GUIDE.md ...]``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

GUIDES_DIR = Path(__file__).resolve().parent.parent / "guides"


class GuideExecutionError(RuntimeError):
    """A guide's cell raised; the message names the guide and the cell."""


def guide_paths() -> list[Path]:
    """Every guide under ``guides/``, the index page excluded."""
    return sorted(p for p in GUIDES_DIR.glob("*.md") if p.name != "index.md")


def execute_guide(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run the guide at ``path`` top to bottom in a new kernel and return the executed notebook."""
    notebook = jupytext.read(path)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    try:
        return client.execute()
    except CellExecutionError as error:
        index = next((i for i, cell in enumerate(notebook.cells) if _cell_failed(cell)), "unknown")
        raise GuideExecutionError(
            f"guide {path.name}: notebook cell {index} failed\n{error}"
        ) from None


def _cell_failed(cell: nbformat.NotebookNode) -> bool:
    """Whether an executed code cell produced an error output it was not allowed to raise."""
    allowed = "raises-exception" in cell.get("metadata", {}).get("tags", [])
    return not allowed and any(o.get("output_type") == "error" for o in cell.get("outputs", []))


def main() -> None:
    """Execute the named guides (default: all) and write ``.ipynb`` copies to ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("guides", nargs="*", type=Path, help="guides to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path("_build/notebooks"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.guides or guide_paths():
        notebook = execute_guide(path.resolve())
        target = args.out / path.with_suffix(".ipynb").name
        nbformat.write(notebook, target)
        print(f"executed {path} -> {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
