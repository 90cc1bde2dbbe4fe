"""What code reads, found from its source: imports at any depth, ``python -m``, named files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from snippets.cache.inputs import Inputs, distributions

PACKAGE = {
    "shop/__init__.py": "",
    "shop/__main__.py": "from shop import till\n",
    "shop/till.py": "from . import prices\n\n\ndef total():\n    from shop.tax import RATE\n",
    "shop/prices.py": "import json\nTABLE = 'prices.json'\n",
    "shop/prices.json": "{}",
    "shop/tax.py": "RATE = 0.2\n",
    "shop/stock.py": "import shop.prices\n",
    "shop/runner.py": "COMMAND = ['python', '-m', 'shop', 'till']\n",
    "shop/copier.py": "FOLDERS = ('data', 'shop')\n",
    "data/rates.csv": "a,b\n",
    "data/helper.py": "x = 1\n",
    "_build/out.json": "{}",
    "data/.pytest_cache/v/lastfailed": "{}",
    "data/build/lib/rates.csv": "a,b\n",
    "data/shop.egg-info/PKG-INFO": "Name: shop\n",
}


@pytest.fixture
def repository(tmp_path: Path, monkeypatch) -> Path:
    """A repository holding the package ``shop``, importable from it."""
    for name, text in PACKAGE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "shop", raising=False)
    return tmp_path


def files(repository: Path, code: str) -> set[str]:
    inputs = Inputs(repository).add_code(code, repository)
    return {path.relative_to(repository).as_posix() for path in inputs.files}


def test_imports_are_followed_relative_and_inside_functions_with_the_files_they_name(repository):
    assert files(repository, "from shop.till import total") == {
        "shop/__init__.py",
        "shop/till.py",
        "shop/prices.py",
        "shop/prices.json",
        "shop/tax.py",
    }


def test_a_module_nothing_imports_is_not_an_input(repository):
    assert "shop/stock.py" not in files(repository, "import shop.till")
    assert files(repository, "import shop.tax") == {"shop/__init__.py", "shop/tax.py"}


def test_python_dash_m_runs_the_packages_main(repository):
    assert files(repository, "import shop.runner") >= {"shop/__main__.py", "shop/till.py"}


def test_a_folder_named_stands_for_its_files_that_are_not_modules(repository):
    """``shop`` and ``data`` are named: their data counts; a module counts only when imported."""
    named = files(repository, "import shop.copier")
    assert {"data/rates.csv", "shop/prices.json"} <= named
    assert not {"data/helper.py", "shop/stock.py", "shop/tax.py"} & named


def test_build_outputs_are_never_inputs(repository):
    assert files(repository, "OUT = '_build/out.json'") == set()


def test_a_named_folders_tool_caches_and_build_outputs_are_not_its_data(repository):
    """A tool writes these whenever it runs (pytest's cache, setuptools' build): not the data."""
    assert files(repository, "FOLDER = 'data'") == {"data/rates.csv"}


def test_installed_packages_count_with_their_versions_and_what_they_require(repository):
    inputs = Inputs(repository).add_code("import pytest\nimport os", repository)
    assert inputs.packages == {"pytest", "os"}
    versions = inputs.versions()
    assert versions["package:pytest"] == pytest.__version__
    assert "package:pluggy" in versions  # pytest requires it
    assert ("pytest", pytest.__version__) in distributions(frozenset({"pytest"}))


def test_the_digest_changes_with_an_imported_module_only(repository):
    before = Inputs(repository).add_code("import shop.till", repository).digest()
    (repository / "shop" / "stock.py").write_text("import shop.tax\n")
    assert Inputs(repository).add_code("import shop.till", repository).digest() == before
    (repository / "shop" / "tax.py").write_text("RATE = 0.25\n")
    assert Inputs(repository).add_code("import shop.till", repository).digest() != before
