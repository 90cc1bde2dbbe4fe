"""The roles of ``snippets/``: imports point from the commands to the readers of XLA's programs to
teaching code to support and the cache; ``snippets/measure/`` holds commands, which no module
imports; names are unique, and only command lines run when a module is run. The site and its
guides use find-barriers through its public API only."""

import ast
from collections import Counter
from pathlib import Path

import pytest

from snippets.__main__ import COMMANDS
from tests.guide_runner import guide_paths
from tests.test_guide_cells import cells

SNIPPETS = Path(__file__).resolve().parent.parent / "snippets"


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(SNIPPETS.parent).with_suffix("").parts).removesuffix(
        ".__init__"
    )


MODULES = {module_name(path): ast.parse(path.read_text()) for path in SNIPPETS.rglob("*.py")}


def imported(tree: ast.Module) -> set[str]:
    """The ``snippets`` modules a module imports, at any depth of its code."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snippets"):
            found |= {f"{node.module}.{alias.name}" for alias in node.names} | {node.module}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("snippets")}
    return {name for name in found if name in MODULES}


def role(name: str) -> str:
    if name.startswith(("snippets.hlo", "snippets.measure", "snippets.support", "snippets.cache")):
        return name.split(".")[1]
    return "commands" if name == "snippets.__main__" else "teaching"


ALLOWED = {
    "support": {"support"},
    "cache": {"cache"},
    "teaching": {"teaching", "support", "cache"},
    "hlo": {"hlo", "teaching", "support", "cache"},  # teaching: the ring model prices collectives
    "measure": {"measure", "hlo", "teaching", "support", "cache"},
    "commands": {"support"},  # each command's module is imported by name, when run
}
COMMAND_MODULES = {f"snippets.measure.{name}" for name in COMMANDS}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_from_commands_to_readers_to_teaching_to_support(name):
    wrong = [other for other in imported(MODULES[name]) if role(other) not in ALLOWED[role(name)]]
    assert not wrong, f"{name} ({role(name)}) imports {wrong}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_a_command(name):
    """A command calls libraries: what a second module needs from a command's module belongs in a
    library (``snippets/``, ``snippets/hlo/``), not beside a ``main``."""
    assert not imported(MODULES[name]) & (COMMAND_MODULES - {name})


def in_measure(name: str) -> bool:
    """A module of ``snippets/measure/`` itself: not a subpackage, nor a module of one."""
    return (SNIPPETS / "measure" / f"{name.removeprefix('snippets.measure.')}.py").is_file()


@pytest.mark.parametrize("name", sorted(filter(in_measure, MODULES)))
def test_snippets_measure_holds_commands_only(name):
    """Each module there has a ``main`` (its command), unless private (``_NAME``: command-line
    plumbing its commands share)."""
    assert has_main(MODULES[name]) or name.rpartition(".")[2].startswith("_"), (
        f"{name} has no main: a library goes in snippets/ or snippets/hlo/, by topic"
    )


def test_public_names_are_unique():
    """One name, one meaning: no two public functions or classes share a name, but ``main``."""
    defined = {  # per module: a typing.overload's stubs and its body are one name
        (module, node.name)
        for module, tree in MODULES.items()
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    }
    names = Counter(name for _, name in defined)
    assert [name for name, count in names.items() if count > 1 and name != "main"] == []


def runs_main(tree: ast.Module) -> bool:
    """Whether the module ends in an ``if __name__ == "__main__":`` block."""
    return any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body
    )


def has_main(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_python_dash_m_snippets_runs_when_a_module_is_run(name):
    assert runs_main(MODULES[name]) == (name == "snippets.__main__")


def test_every_command_is_a_main_and_every_main_a_command():
    """``python -m snippets`` lists each module with a ``main`` once, and only those."""
    mains = {name for name, tree in MODULES.items() if has_main(tree)} - {"snippets.__main__"}
    assert sorted(f"snippets.measure.{name}" for name in COMMANDS) == sorted(mains)


PUBLIC_MODULES = {"find_barriers", "find_barriers.jax", "find_barriers.testing"}
"""find-barriers' public modules: what the site may import of it (its other modules are private)."""


def private_uses(tree: ast.AST) -> list[str]:
    """The private names of find-barriers ``tree`` imports or reads: a module outside
    :data:`PUBLIC_MODULES`, a name its ``__all__`` leaves out, an attribute with an underscore."""
    import find_barriers  # noqa: PLC0415 - the names it makes public, read where they are checked

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("find_barriers.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("find_barriers"):
            if node.module not in PUBLIC_MODULES:
                found.append(node.module)
            elif node.module == "find_barriers":
                found += [a.name for a in node.names if a.name not in find_barriers.__all__]
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "find_barriers"
            and node.attr not in find_barriers.__all__
        ):
            found.append(f"find_barriers.{node.attr}")
    return [name for name in found if name not in PUBLIC_MODULES]


SITE_CODE = {
    **{f"snippets: {name}": tree for name, tree in MODULES.items()},
    **{
        f"guide: {guide.name}": ast.Module(
            [node for _, cell in cells(guide) for node in cell.body], []
        )
        for guide in guide_paths()
    },
}


@pytest.mark.parametrize("name", sorted(SITE_CODE))
def test_the_site_uses_only_find_barriers_public_api(name):
    assert private_uses(SITE_CODE[name]) == [], f"{name} reaches into find-barriers' private code"


def test_a_private_use_is_found():
    code = "import find_barriers._sites\nfrom find_barriers import _check, find_sites\n"
    code += "from find_barriers._rules import RULES\nfind_barriers.check(find_barriers._dumps)\n"
    found = private_uses(ast.parse(code))
    assert found == [
        "find_barriers._sites",
        "_check",
        "find_barriers._rules",
        "find_barriers._dumps",
    ]
