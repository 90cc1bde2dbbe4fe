"""The roles of ``snippets/``: imports point from measurement to teaching to support, names are
unique, and only command lines run when a module is run."""

import ast
from collections import Counter
from pathlib import Path

import pytest

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


def is_entry_point(tree: ast.Module) -> bool:
    """A command's thin entry point: ``run_command("snippets.measure.NAME", __name__)``, alone."""
    calls = [node.value for node in tree.body if isinstance(node, ast.Expr)]
    return [ast.unparse(call.func) for call in calls if isinstance(call, ast.Call)] == [
        "run_command"
    ] and calls[-1].args[0].value.startswith("snippets.measure.")


def role(name: str) -> str:
    if name.startswith(("snippets.hlo", "snippets.measure", "snippets.support")):
        return name.split(".")[1]
    return "entry point" if is_entry_point(MODULES[name]) else "teaching"


ALLOWED = {
    "support": {"support"},
    "teaching": {"teaching", "support"},
    "hlo": {"hlo", "teaching", "support"},  # teaching: the ring model prices collectives
    "measure": {"measure", "hlo", "teaching", "support"},
    "entry point": {"measure", "support"},
}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_from_measurement_to_teaching_to_support(name):
    wrong = [other for other in imported(MODULES[name]) if role(other) not in ALLOWED[role(name)]]
    assert not wrong, f"{name} ({role(name)}) imports {wrong}"


def test_public_names_are_unique():
    """One name, one meaning: no two public functions or classes share a name, but ``main``."""
    names = Counter(
        node.name
        for tree in MODULES.values()
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")
    )
    assert [name for name, count in names.items() if count > 1 and name != "main"] == []


def runs_main(tree: ast.Module) -> bool:
    """Whether the module ends in an ``if __name__ == "__main__":`` block."""
    return any(
        isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body
    )


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_a_command_line_runs_when_the_module_is_run(name):
    tree = MODULES[name]
    has_main = any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body)
    if role(name) == "measure" and has_main:  # its command runs through its entry point ...
        entry = name.replace("snippets.measure.", "snippets.")
        has_main = entry not in MODULES  # ... unless it has none (barrier_check, barrier_bench)
    assert runs_main(tree) == has_main


def test_each_entry_point_runs_the_command_line_of_its_measure_module():
    entry_points = [name for name in MODULES if role(name) == "entry point"]
    assert entry_points, "no entry point found: is_entry_point no longer reads them"
    for name in entry_points:
        target = MODULES[name].body[-1].value.args[0].value
        assert target == name.replace("snippets.", "snippets.measure."), name
        assert any(
            isinstance(node, ast.FunctionDef) and node.name == "main"
            for node in MODULES[target].body
        ), f"{target} has no main for {name} to run"
