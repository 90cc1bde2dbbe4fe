"""Ruff's formatting (and, when fixing, its fixes) for the code cells of MyST guides only.

Usage: python .github/scripts/format_guide_cells.py [--check] guides/NAME.md ...

jupytext reads each guide as a notebook and ruff formats it as ``.ipynb``, cell by cell, with
the project's settings. ``--check`` prints a diff for each cell that would change, with its line
in the ``.md``, and exits 1; without it, ``ruff check --fix`` runs first and each changed cell
is replaced, as text, in the ``.md``. Prose, cell options and the header stay exactly as
written, unlike ``jupytext --pipe``, which writes the whole file back in its own style.
"""

import difflib
import json
import subprocess
import sys
from pathlib import Path

import jupytext

FENCE = "\n```"  # a code cell's source ends right before its closing fence


def ruff(args: list[str], notebook: str, name: str) -> str:
    command = ["ruff", *args, "--stdin-filename", name, "-"]
    result = subprocess.run(command, input=notebook, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not result.stdout.strip():
        sys.exit(f"{name}: ruff failed on the guide's cells:\n{result.stderr}")
    return result.stdout


def format_guide(path: Path, check: bool) -> bool:
    """Format one guide's cells (or, with ``check``, report them); True if any cell changes."""
    text = path.read_text()
    name = str(path.with_suffix(".ipynb"))
    before = jupytext.writes(jupytext.reads(text, fmt="md:myst"), fmt="ipynb")
    fixed = before if check else ruff(["check", "--fix", "--exit-zero", "--quiet"], before, name)
    after = ruff(["format"], fixed, name)
    new = text
    cells = zip(json.loads(before)["cells"], json.loads(after)["cells"], strict=True)
    for old_cell, new_cell in cells:
        old, formatted = "".join(old_cell["source"]), "".join(new_cell["source"])
        if old_cell["cell_type"] != "code" or old == formatted:
            continue
        if new.count(old + FENCE) != 1:
            sys.exit(f"{path}: this cell's code appears more than once; format it by hand:\n{old}")
        if check:
            line = text[: text.index(old + FENCE)].count("\n") + 1
            where = f"{path}:{line}"
            diff = difflib.unified_diff(
                old.splitlines(), formatted.splitlines(), where, where + " (formatted)", lineterm=""
            )
            print("\n".join(diff))
        new = new.replace(old + FENCE, formatted + FENCE)
    if new != text and not check:
        path.write_text(new)
        print(f"formatted {path}")
    return new != text


if __name__ == "__main__":
    check = "--check" in sys.argv[1:]
    guides = [Path(arg) for arg in sys.argv[1:] if arg != "--check"]
    changed = [format_guide(path, check) for path in guides]
    if check and any(changed):
        print("To format them: pre-commit run --all-files --hook-stage manual guide-cells-fix")
    sys.exit(1 if any(changed) else 0)
