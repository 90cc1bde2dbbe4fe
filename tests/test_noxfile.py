"""noxfile.py's sessions name their Python, so nox under any Python builds environments it accepts,
and a session named as a command runs that command."""

import ast
from pathlib import Path

from snippets.__main__ import COMMANDS

ROOT = Path(__file__).resolve().parent.parent


def keywords(decorator: ast.expr) -> dict[str, ast.expr]:
    """A decorator call's keyword arguments by name (none for a bare decorator)."""
    return {k.arg: k.value for k in decorator.keywords} if isinstance(decorator, ast.Call) else {}


def declares_python(function: ast.FunctionDef) -> bool:
    """``@nox.session(python=...)``, or a ``@nox.parametrize`` over ``python``."""
    for decorator in function.decorator_list:
        if "python" in keywords(decorator):
            return True
        call = decorator if isinstance(decorator, ast.Call) else None
        if (
            call
            and ast.unparse(call.func) == "nox.parametrize"
            and "python" in ast.unparse(call.args[0])
        ):
            return True
    return False


def sessions_needing_python(source: str) -> list[str]:
    """The sessions that create an environment (every one without ``venv_backend="none"``)
    and declare no Python."""
    missing = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        sessions = [d for d in node.decorator_list if ast.unparse(d).startswith("nox.session")]
        if not sessions:
            continue
        backend = keywords(sessions[0]).get("venv_backend")
        no_environment = isinstance(backend, ast.Constant) and backend.value == "none"
        if not no_environment and not declares_python(node):
            missing.append(node.name)
    return missing


def test_every_session_with_an_environment_declares_its_python():
    assert sessions_needing_python((ROOT / "noxfile.py").read_text()) == []


def test_a_session_without_a_python_is_found():
    source = (
        "@nox.session(default=True)\ndef tests(session): ...\n"
        '@nox.session(venv_backend="none")\ndef clean(session): ...\n'
        "@nox.session(python=PYTHON)\ndef docs(session): ...\n"
        '@nox.session\n@nox.parametrize(("python", "jax"), RELEASES)\ndef matrix(session, jax): ...\n'
    )
    assert sessions_needing_python(source) == ["tests"]


def test_sessions_read_their_python_from_requires_python():
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    assigned = {
        target.id: ast.unparse(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert assigned["PYTHON"] == "PYPROJECT['project']['requires-python']"


def test_reading_the_noxfile_runs_no_check():
    """Only imports, settings, constants and sessions at the top level: nox checks each
    session's Python when the session starts, so nothing runs when nox reads the file."""
    calls = [
        ast.unparse(node)
        for node in ast.parse((ROOT / "noxfile.py").read_text()).body
        if isinstance(node, ast.Expr) and not isinstance(node.value, ast.Constant)
    ]
    assert calls == []


def commands_run(function: ast.FunctionDef) -> list[str]:
    """The ``python -m snippets NAME`` commands a session runs: each ``"-m", "snippets", NAME``."""
    found = []
    for node in ast.walk(function):
        args = [ast.unparse(arg) for arg in node.args] if isinstance(node, ast.Call) else []
        found += [
            name.strip("'\"")
            for flag, package, name in zip(args, args[1:], args[2:], strict=False)
            if (flag, package) == ("'-m'", "'snippets'")
        ]
    return found


def test_a_session_named_as_a_command_runs_that_command():
    """One name per thing: ``nox -s NAME`` and ``python -m snippets NAME`` are the same benchmark."""
    sessions = [
        node
        for node in ast.parse((ROOT / "noxfile.py").read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name in COMMANDS
    ]
    assert sessions, "no session is named as a command"
    assert {node.name: commands_run(node) for node in sessions} == {
        node.name: [node.name] for node in sessions
    }


def test_a_session_running_another_command_is_found():
    session = ast.parse(
        'def bench(session):\n    session.run("python", "-m", "snippets", "barrier_bench")'
    )
    assert commands_run(session.body[0]) == ["barrier_bench"]
