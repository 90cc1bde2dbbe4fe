"""Every link to JAX's source names the installed release and the lines that hold what it cites.

Pages cite JAX as ``[label]: jax-source:NAME``, or ``[label]: jax-source:NAME "TEXT"`` for the
statement in NAME that holds TEXT; ``docs/_ext/jax_source.py`` turns them into GitHub addresses at
the release's tag. Each cited name is looked up here through Python's own ``inspect`` in the
installed JAX, so a release that moves or drops one fails by name.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import jax
import pytest

import jax_source
from tests.sphinx_project import build_project

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([*ROOT.glob("guides/*.md"), *ROOT.glob("docs/*.md")])
TARGET = re.compile(r'jax-source:([^\s)>"]+)(?:\s+"([^"]*)")?')


def cited() -> list[tuple[str, str]]:
    """Every ``jax-source:`` link's name and text (``""`` for none) on the site's pages."""
    return sorted({found for page in PAGES for found in TARGET.findall(page.read_text())})


def installed(name: str) -> object:
    """The object ``name`` (a module, or a module's attribute path) in the installed JAX."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            found = getattr(found, part)
        return found
    raise ImportError(name)


def test_no_page_or_snippet_links_jax_at_a_fixed_commit():
    sources = [*PAGES, *ROOT.glob("snippets/**/*.py")]
    fixed = [path.name for path in sources if "github.com/jax-ml/jax/blob/" in path.read_text()]
    assert not fixed, f"link JAX's source as jax-source:NAME instead: {fixed}"


def test_the_pages_cite_jax_source():
    assert len(cited()) >= 10, cited()


@pytest.mark.parametrize(("name", "text"), cited(), ids=" ".join)
def test_each_cited_name_is_where_its_link_points(name, text):
    target = f"{name} {text!r}"
    path, first, last = jax_source.jax_source_lines(name, text)
    file = Path(jax.__file__).parent.parent / path
    lines = file.read_text().splitlines()[first - 1 : last]
    found = installed(name)
    if inspect.ismodule(found):
        assert inspect.getsourcefile(found) == str(file)
    else:
        body, start = inspect.getsourcelines(found)
        assert inspect.getsourcefile(found) == str(file)
        if not text:
            assert (first, last) == (start, start + len(body) - 1), target
            short = name.rsplit(".", 1)[1]
            assert re.search(rf"\b(def|class) {re.escape(short)}\b", "\n".join(lines)), target
        assert start <= first <= last < start + len(body), target
    if text:
        assert any(text in line for line in lines), f"{target}: lines {first}-{last}"


def test_each_link_names_the_installed_release():
    for name, text in cited():
        path, first, _ = jax_source.jax_source_lines(name, text)
        prefix = f"https://github.com/jax-ml/jax/blob/jax-v{jax.__version__}/{path}#L{first}"
        assert jax_source.jax_source_url(name, text).startswith(prefix)


def test_a_missing_name_or_text_is_an_error_that_says_what():
    errors = {
        ("jax._src.pjit.no_such_function", ""): "jax/_src/pjit.py defines no 'no_such_function'",
        ("jax._src.pjit", "no such text"): "'no such text' is in jax._src.pjit 0 times, not once",
        ("jax._src.no_such_module.f", ""): "jax/_src/__init__.py defines no 'no_such_module'",
    }
    for (name, text), message in errors.items():
        with pytest.raises(LookupError, match=re.escape(message)):
            jax_source.jax_source_lines(name, text)
    with pytest.raises(LookupError, match=r"'def ' is in jax\._src\.pjit \d{2,} times"):
        jax_source.jax_source_lines("jax._src.pjit", "def ")


SCHEMES = 'myst_url_schemes = ["https", "jax-source"]\n'
PAGE = """# JAX's source

[found][found] and [lost][lost]

[found]: jax-source:jax._src.pjit.assert_shardings_equal
[lost]: jax-source:jax._src.pjit "no such text"
"""


def test_the_build_links_a_name_and_fails_on_a_missing_one(tmp_path):
    (tmp_path / "index.md").write_text(PAGE)
    build = build_project(tmp_path, tmp_path / "html", ["myst_parser", jax_source], SCHEMES, "-q")
    assert build.returncode == 1
    assert "index.md:3" in build.stderr
    assert "'no such text' is in jax._src.pjit 0 times" in build.stderr
    body, start = inspect.getsourcelines(installed("jax._src.pjit.assert_shardings_equal"))
    address = (
        f"https://github.com/jax-ml/jax/blob/jax-v{jax.__version__}/jax/_src/pjit.py"
        f"#L{start}-L{start + len(body) - 1}"
    )
    assert f'href="{address}"' in (tmp_path / "html" / "index.html").read_text()


def test_the_built_site_links_jax_only_at_the_installed_release(built_site):
    pages = {page: page.read_text() for page in built_site.html.rglob("*.html")}
    links = {
        link
        for text in pages.values()
        for link in re.findall(r'href="(https://github\.com/jax-ml/jax/blob/[^"]+)"', text)
    }
    assert links, "no page links JAX's source"
    release = f"https://github.com/jax-ml/jax/blob/jax-v{jax.__version__}/"
    assert sorted(link for link in links if not link.startswith(release)) == []
    assert [page.name for page, text in pages.items() if "jax-source:" in text] == []
