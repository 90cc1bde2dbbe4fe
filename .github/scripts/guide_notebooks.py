"""Each guide as a notebook beside it (``guides/NAME.ipynb``, no outputs): what the site's
"Colab" launch button opens from the repository, since Colab reads ``.ipynb`` and not MyST.

Usage: python .github/scripts/guide_notebooks.py [--check] guides/NAME.md|ipynb ...

Writes the notebook of each guide named (by its ``.md``, the source, or its notebook) that has
code cells; ``--check`` writes nothing, names each notebook that is missing or differs from its
guide, and exits 1.
"""

import sys
from pathlib import Path

import jupytext
import nbformat


def notebook(guide: Path) -> str:
    """The guide's notebook as text: its cells and kernel, without jupytext's header, each
    cell's id its position (jupytext draws them at random)."""
    found = jupytext.read(guide)
    found.metadata.pop("jupytext", None)
    for number, cell in enumerate(found.cells):
        cell.id = f"cell-{number}"
    return nbformat.writes(found) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    guides = dict.fromkeys(Path(arg).with_suffix(".md") for arg in argv if arg != "--check")
    for guide in (g for g in guides if "```{code-cell}" in g.read_text()):
        target, text = guide.with_suffix(".ipynb"), notebook(guide)
        if target.is_file() and target.read_text() == text:
            continue
        stale.append(target)
        if not check:
            target.write_text(text)
    for target in stale:
        print(f"{target}: {'differs from its guide' if check else 'written'}")
    if stale and check:
        print("write them: python .github/scripts/guide_notebooks.py guides/*.md")
    return int(check and bool(stale))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
