"""Every ``python -m snippets NAME`` the project writes (in a docstring, comment, page, README or
a command list such as ``"-m", "snippets", "NAME"``) names a command ``python -m snippets`` has."""

import re
from pathlib import Path

import pytest

from snippets.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parent.parent
WRITTEN = sorted(
    {
        *ROOT.glob("snippets/**/*.py"),
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("docs/_ext/*.py"),
        *ROOT.glob("guides/*.md"),
        *ROOT.glob("tests/**/*.py"),
        *(ROOT / name for name in ("README.md", "conf.py", "conftest.py", "noxfile.py")),
        *ROOT.glob(".github/workflows/*.yml"),
    }
    - {Path(__file__).resolve()}  # its examples name what is not a command
)
"""Every file that may tell a reader to run a command."""

COMMAND_LINE = re.compile(
    r"python3?\s+-m\s+snippets(?P<module>\.[\w.]*)?(?:[ \t]*\n?\s*(?P<name>\w+))?"
)
"""``python -m snippets`` and the word after it, on the same line or the next (a wrapped line)."""
COMMAND_LIST = re.compile(r"""["']-m["'],\s*["']snippets["'],\s*["'](?P<name>\w+)["']""")
"""A command written as a process's arguments: ``"-m", "snippets", "NAME"``."""
PLACEHOLDERS = {"NAME", "COMMAND"}


def named_commands(text: str) -> list[str]:
    """Each command ``text`` tells a reader to run, as written: ``snippets.NAME`` for the module
    form (``python -m snippets.NAME``, which runs nothing), and only real names, not placeholders.

    >>> named_commands("run ``python -m snippets\\n    barrier --json`` or ``python -m snippets``")
    ['barrier']
    >>> named_commands('["-m", "snippets", "bench"]; python -m snippets.NAME; python -m snippets NAME')
    ['snippets.NAME', 'bench']
    """
    found = []
    for match in COMMAND_LINE.finditer(text):
        if match["module"]:
            found.append(f"snippets{match['module']}")
        elif match["name"] and match["name"] not in PLACEHOLDERS:
            found.append(match["name"])
    return found + [
        match["name"] for match in COMMAND_LIST.finditer(text) if match["name"] not in PLACEHOLDERS
    ]


def test_the_files_are_found():
    assert ROOT / "README.md" in WRITTEN
    assert any(path.parent.name == "guides" for path in WRITTEN)


@pytest.mark.parametrize("path", WRITTEN, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_python_dash_m_snippets_names_a_command(path):
    unknown = [name for name in named_commands(path.read_text()) if name not in COMMANDS]
    assert not unknown, f"{path.relative_to(ROOT)} names {unknown}; the commands: {COMMANDS}"
