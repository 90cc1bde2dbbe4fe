"""Fixtures for the browser test: a built site, a local web server and headless Chromium.

These tests run only when named on the command line (``pytest tests/browser``, as
``nox -s browser`` does): the default ``pytest`` run neither collects nor imports them,
so it needs no browser. Chromium is the binary ``CHROMIUM`` names, else Debian's
``/usr/bin/chromium`` (``apt-get install chromium``), driven by Playwright for Python.
``.ci/run`` sets ``CHROMIUM`` to the one ``.ci/find-browser`` finds: ``/usr/bin/chromium``, else
Playwright's own (``playwright install --with-deps chromium``).

They check the site ``nox -s browser`` builds into ``_build/browser-site`` first, or the one
``BROWSER_SITE=DIR`` names. Screenshots land in ``_build/browser-screenshots``.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SITE = ROOT / "_build" / "browser-site"
SCREENSHOTS = ROOT / "_build" / "browser-screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


PAGE_LENGTHS = pytest.StashKey[dict]()
EXTERNAL_LINKS = pytest.StashKey[dict]()


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """Print each page's length and its external links, as the tests measured them."""
    if lengths := config.stash.get(PAGE_LENGTHS, None):
        terminalreporter.section(
            "page lengths (words outside collapsed dropdowns; 390x844 screens)"
        )
        for page, length in sorted(lengths.items()):
            terminalreporter.line(
                f"{length['words']:6d} words {length['phone_screens']:5.1f} screens  {page}"
            )
    if links := config.stash.get(EXTERNAL_LINKS, None):
        terminalreporter.section("external links per page")
        for page, urls in sorted(links.items()):
            for url in urls:
                terminalreporter.line(f"{page}: {url}")


def _named_on_command_line(config: pytest.Config) -> bool:
    """Whether an argument of this run points into ``tests/browser``."""
    if config.args_source != pytest.Config.ArgsSource.ARGS:
        return False
    for argument in config.args:
        path = (Path(config.invocation_params.dir) / argument.split("::")[0]).resolve()
        if path == HERE or HERE in path.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Skip this folder (tests and doctest modules alike) unless the run names it."""
    if not _named_on_command_line(config):
        return True
    return None


@pytest.fixture(scope="session")
def site() -> Path:
    """The built HTML site: ``BROWSER_SITE`` if set, else ``_build/browser-site``."""
    built = Path(os.environ.get("BROWSER_SITE", SITE)).resolve()
    if not (built / "index.html").is_file():
        pytest.fail(f"No built site at {built}: run `nox -s browser` (or set BROWSER_SITE).")
    return built


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="session")
def base_url(site: Path) -> Iterator[str]:
    """The site served over http on a loopback port."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser():
    """Chromium (``CHROMIUM``, else Debian's), headless, through Playwright."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"No Chromium at {CHROMIUM}: run `apt-get install -y chromium` on Debian, or set "
            "CHROMIUM to another (`bash .ci/find-browser` finds or installs one)."
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def screenshots() -> Path:
    """A fresh folder for this run's screenshots."""
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS
