"""Apply ruff's fixes and formatting to the code cells of MyST guides, and nothing else.

Usage: python .github/scripts/fix_guide_cells.py guides/NAME.md ...

jupytext reads each guide as a notebook; ruff fixes and formats it as ``.ipynb`` (cell by
cell, with the project's settings); each cell whose code changed is replaced, as text, in
the ``.md``. Prose, cell options and the header stay exactly as written, unlike
``jupytext --pipe``, which writes the whole file back in its own style.
"""

import json
import subprocess
import sys
from pathlib import Path

import jupytext


def ruff(args: list[str], notebook: str, name: str) -> str:
    command = ["ruff", *args, "--stdin-filename", name, "-"]
    result = subprocess.run(command, input=notebook, capture_output=True, text=True, check=False)
    return result.stdout


def fix(path: Path) -> bool:
    text = path.read_text()
    before = jupytext.writes(jupytext.reads(text, fmt="md:myst"), fmt="ipynb")
    name = str(path.with_suffix(".ipynb"))
    after = ruff(["format"], ruff(["check", "--fix", "--exit-zero", "--quiet"], before, name), name)
    if not after.strip():
        sys.exit(f"{path}: ruff could not read its cells; run the guide-cells-ruff-check hook")
    new = text
    cells = zip(json.loads(before)["cells"], json.loads(after)["cells"], strict=True)
    for old_cell, new_cell in cells:
        old, fixed = "".join(old_cell["source"]), "".join(new_cell["source"])
        if old_cell["cell_type"] != "code" or old == fixed:
            continue
        if new.count(old + "\n```") != 1:
            sys.exit(f"{path}: a cell's code appears more than once; fix it by hand:\n{old}")
        new = new.replace(old + "\n```", fixed + "\n```")
    if new != text:
        path.write_text(new)
        print(f"fixed {path}")
    return new != text


if __name__ == "__main__":
    changed = [fix(Path(arg)) for arg in sys.argv[1:]]
    sys.exit(1 if any(changed) else 0)
