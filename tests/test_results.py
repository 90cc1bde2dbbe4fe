"""A shared result is computed once per content of what produced it, and read back elsewhere."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from snippets.cache.results import FOLDER

TALLY = {
    "tally/__init__.py": "",
    "tally/weight.py": "WEIGHT = 2\n",
    "tally/count.py": (
        "import time\n"
        "from pathlib import Path\n\n"
        "from snippets.cache.results import shared\n"
        "from tally.weight import WEIGHT\n\n"
        "RUNS = Path(__file__).with_name('runs')\n\n\n"
        "@shared\n"
        "def count(x, y=1, pause=0.0):\n"
        "    time.sleep(pause)\n"
        "    with RUNS.open('a') as runs:\n"
        "        runs.write('run\\n')\n"
        "    return x * y * WEIGHT\n"
    ),
    "tally/unrelated.py": "NOTHING = None\n",
}


@pytest.fixture
def tally(tmp_path: Path, monkeypatch):
    """``tally.count``, a shared function in a repository of its own, and how often it ran."""
    for name, text in TALLY.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("tally", "tally.weight", "tally.count"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setenv(FOLDER, str(tmp_path / "results"))
    module = importlib.import_module("tally.count")

    def runs() -> int:
        return len(module.RUNS.read_text().splitlines()) if module.RUNS.exists() else 0

    return module.count, runs, tmp_path


def test_a_second_call_reads_the_result_whatever_the_arguments_look_like(tally):
    count, runs, _ = tally
    assert count(3) == 6
    assert count(x=3, y=1) == 6
    assert runs() == 1
    assert count(3, 2) == 12
    assert runs() == 2


def test_without_a_folder_the_function_just_runs(tally, monkeypatch):
    count, runs, _ = tally
    monkeypatch.delenv(FOLDER)
    count(3)
    count(3)
    assert runs() == 2


def test_editing_a_module_it_imports_computes_it_again_and_an_unrelated_one_does_not(tally):
    count, runs, repository = tally
    count(3)
    (repository / "tally" / "unrelated.py").write_text("NOTHING = 1\n")
    count(3)
    assert runs() == 1
    (repository / "tally" / "weight.py").write_text("WEIGHT = 3\n")
    count(3)
    assert runs() == 2


def test_a_second_process_waits_for_the_first_and_reads_its_result(tally):
    _, runs, repository = tally
    code = "import sys; from tally.count import count; print(count(3, pause=2.0))"
    processes = [
        subprocess.Popen([sys.executable, "-c", code], cwd=repository, stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    assert [process.communicate()[0] for process in processes] == [b"6\n", b"6\n"]
    assert runs() == 1
