"""Every built page in headless Chromium, at 1280 and 390 px, light and dark, as a reader sees it.

One pass visits each page and records what it finds; the tests below each assert one
property over those records, so a failure names the page, the width and the problem.
Screenshots of every page are saved under ``_build/browser-screenshots`` for a person
to look at.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest
from PIL import Image

from snippets.figures import METADATA_KEY
from tests.browser.conftest import EXTERNAL_LINKS, PAGE_LENGTHS

ROOT = Path(__file__).resolve().parents[2]

WIDTHS = (1280, 390)
HEIGHTS = {1280: 800, 390: 844}
"""The screen each width is seen on: a laptop, and a phone (the height a phone screen counts)."""
SCHEMES = ("light", "dark")
MIN_FIGURE_TEXT_PX = 10.0
RAW_MARKUP = (".. py:", ".. auto", "{glue", "{code-cell}", "{literalinclude}", "{eval-rst}", ":::")
GUIDES = (
    "devices_and_meshes",
    "shard_mode_performance",
    "choosing_a_mode",
    "reduce_scatter",
    "checkpoints",
    "maxtext_decoder",
    "check_a_run",
)

KNOWN_CONSOLE_ERRORS: dict[str, str] = {}
"""Console errors from the theme that this project cannot fix: message pattern -> upstream issue."""

COLLECT = """
async () => {
  await document.fonts.ready;
  await Promise.all([...document.images].map((img) => img.complete ? null :
    new Promise((done) => { img.addEventListener("load", done); img.addEventListener("error", done); })));
  const visible = (el) => el.offsetParent !== null;
  const wideCode = (root) => [...root.querySelectorAll("pre")]
    .filter((pre) => visible(pre) && pre.scrollWidth > pre.clientWidth + 1)
    .map((pre) => pre.textContent.trim().split("\\n")[0].slice(0, 90));
  const main = document.querySelector("article.bd-article") || document.body;
  // What a reader scrolls through: the article without collapsed dropdowns, scripts and styles.
  const reading = main.cloneNode(true);
  reading.querySelectorAll("details:not([open]) > :not(summary), script, style, wbr")
    .forEach((el) => el.remove());
  reading.normalize();  // a name a <wbr> split (docs/_ext/code_breaks.py) is one word again
  const walker = document.createTreeWalker(reading, NodeFilter.SHOW_TEXT);
  const pieces = [];  // every text node, code and outputs included, each a separate run of words
  while (walker.nextNode()) pieces.push(walker.currentNode.nodeValue);
  const words = pieces.join(" ").split(/\\s+/).filter(Boolean).length;
  const tables = [...main.querySelectorAll("table")].filter(visible).map((table) => {
    const box = table.parentElement;
    const first = table.querySelector("tr > :first-child");
    return {
      head: (table.querySelector("tr") || table).textContent.trim().split(/\\s+/).slice(0, 6).join(" "),
      overflows: table.scrollWidth > box.clientWidth + 1 || table.getBoundingClientRect().right > window.innerWidth + 1,
      sticky: !!first && getComputedStyle(first).position === "sticky",
    };
  });
  const height = document.documentElement.scrollHeight;  // dropdowns as the reader finds them
  const collapsed = wideCode(document);
  document.querySelectorAll("details").forEach((d) => { d.open = true; });
  const expanded = wideCode(document);
  // Inline code that wraps between two letters or digits: each character's line, in order.
  const midWordBreaks = [...main.querySelectorAll("code.literal")]
    .filter((code) => visible(code) && code.getClientRects().length > 1)
    .flatMap((code) => {
      const found = [];
      const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      let before = null;  // the last character laid out before this one, and its line's top
      while (walker.nextNode()) {
        const node = walker.currentNode;
        for (let i = 0; i < node.length; i++) {
          const range = document.createRange();
          range.setStart(node, i);
          range.setEnd(node, i + 1);
          const box = range.getClientRects()[0];
          const char = node.nodeValue[i];
          if (!box || /\\s/.test(char)) { before = null; continue; }  // a space is a word's end
          if (before && box.top > before.top + 1 && /[A-Za-z0-9]/.test(before.char)
              && /[A-Za-z0-9]/.test(char)) {
            found.push(`${code.textContent.trim().slice(0, 60)} (${before.char}|${char})`);
          }
          before = {char: char, top: box.top};
        }
      }
      return found;
    });
  return {
    url: location.href,
    ids: [...document.querySelectorAll("[id]")].map((el) => el.id)
      .concat([...document.querySelectorAll("a[name]")].map((a) => a.name)),
    links: [...document.querySelectorAll("a[href]")].map((a) => a.href),
    images: [...document.images].map((img) => ({
      src: img.currentSrc || img.src, loaded: img.complete && img.naturalWidth > 0,
      shown: img.clientWidth, natural: img.naturalWidth, alt: img.alt })),
    pageWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
    wideCode: [...new Set(collapsed.concat(expanded))],
    text: main.innerText,
    words: words,
    height: height,
    tables: tables,
    midWordBreaks: midWordBreaks,
    searches: [...document.querySelectorAll(".search-button__button")].filter(visible).length,
  };
}
"""


@dataclasses.dataclass
class Visit:
    """What one page showed at one width and colour scheme."""

    page: str
    width: int
    scheme: str
    url: str = ""
    ids: list[str] = dataclasses.field(default_factory=list)
    links: list[str] = dataclasses.field(default_factory=list)
    images: list[dict] = dataclasses.field(default_factory=list)
    page_width: int = 0
    wide_code: list[str] = dataclasses.field(default_factory=list)
    text: str = ""
    words: int = 0
    height: int = 0
    tables: list[dict] = dataclasses.field(default_factory=list)
    mid_word_breaks: list[str] = dataclasses.field(default_factory=list)
    searches: int = 0
    console_errors: list[str] = dataclasses.field(default_factory=list)
    failed_responses: list[str] = dataclasses.field(default_factory=list)
    offhost_requests: list[str] = dataclasses.field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page} at {self.width} px ({self.scheme})"


def built_pages(site: Path) -> list[str]:
    """Every HTML page of the site, as a path relative to its root."""
    skip = ("_static/", "_sources/", "_images/")
    return sorted(
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if not p.relative_to(site).as_posix().startswith(skip)
    )


def redirect_target(site: Path, page: str) -> str:
    """Where a meta-refresh page sends the reader, relative to the site root ("" if nowhere)."""
    match = re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', (site / page).read_text())
    return (Path(page).parent / match.group(1)).as_posix() if match else ""


def local_host(url: str) -> bool:
    """Whether ``url`` stays on this machine (or is inline data)."""
    parsed = urlparse(url)
    return parsed.scheme in ("data", "blob", "about", "file") or parsed.hostname == "127.0.0.1"


SCREENSHOT_PART_PX = 6000
"""Full pages are saved in parts of this height: Chromium cannot capture very tall pages whole."""


FIRST_SCREEN_ONLY = {"docs/reference.html"}
"""Content pages saved as their first screen only: the API reference is over 100 phone screens
tall, and capturing it whole took most of the browser checks' time."""


def save_screenshots(tab, folder: Path, page: str, full: bool) -> None:
    """The whole page (or only the first screen), as ``NAME.png`` or ``NAME-1.png``, ``-2``, ..."""
    folder.mkdir(parents=True, exist_ok=True)
    name = page.replace("/", "__").removesuffix(".html")
    if not full:
        tab.screenshot(path=str(folder / f"{name}.png"))
        return
    width, height = tab.evaluate(
        "() => [document.documentElement.clientWidth, document.documentElement.scrollHeight]"
    )
    parts = range(0, height, SCREENSHOT_PART_PX)
    for number, top in enumerate(parts, start=1):
        suffix = f"-{number}" if len(parts) > 1 else ""
        clip = {"x": 0, "y": top, "width": width, "height": min(SCREENSHOT_PART_PX, height - top)}
        tab.screenshot(path=str(folder / f"{name}{suffix}.png"), full_page=True, clip=clip)


def visit(tab, base_url: str, page: str, record: Visit, screenshots: Path, redirect: str) -> None:
    """Load ``page`` in ``tab``, fill ``record`` with what it shows, save a screenshot.

    ``redirect`` is where a page that redirects should land ("" when it does not). Guides and
    other content pages (bar ``FIRST_SCREEN_ONLY``) are saved whole in light mode; the rest as
    their first screen.
    """
    tab.goto(f"{base_url}/{page}", wait_until="load")
    if redirect:  # the root index.html opens the landing page with a meta refresh
        tab.wait_for_url(f"{base_url}/{redirect}")
        tab.wait_for_load_state("load")
    whole = (
        record.scheme == "light"
        and page.startswith(("guides/", "docs/"))
        and page not in FIRST_SCREEN_ONLY
    )
    save_screenshots(tab, screenshots / f"{record.width}-{record.scheme}", page, full=whole)
    found = tab.evaluate(COLLECT)
    record.url, record.ids, record.links = found["url"], found["ids"], found["links"]
    record.images, record.page_width = found["images"], found["pageWidth"]
    record.wide_code, record.text = found["wideCode"], found["text"]
    record.words, record.height, record.tables = found["words"], found["height"], found["tables"]
    record.searches, record.mid_word_breaks = found["searches"], found["midWordBreaks"]


def visit_all(browser, base_url, pages, width, scheme, screenshots, site) -> list[Visit]:
    """Every page in one tab of one browser context at this width and colour scheme."""
    records: list[Visit] = []
    context = browser.new_context(
        viewport={"width": width, "height": HEIGHTS[width]},
        color_scheme=scheme,
        device_scale_factor=1,
    )

    def route(request_route):
        url = request_route.request.url
        if local_host(url):
            request_route.continue_()
        else:
            records[-1].offhost_requests.append(url)
            request_route.abort()

    context.route("**/*", route)
    tab = context.new_page()
    tab.on("console", lambda m: m.type == "error" and records[-1].console_errors.append(m.text))
    tab.on("pageerror", lambda e: records[-1].console_errors.append(f"uncaught: {e}"))
    tab.on(
        "response",
        lambda r: r.status >= 400 and records[-1].failed_responses.append(f"{r.status} {r.url}"),
    )
    for page in pages:
        records.append(Visit(page, width, scheme))
        visit(tab, base_url, page, records[-1], screenshots, redirect_target(site, page))
    context.close()
    return records


@pytest.fixture(scope="session")
def visits(site, base_url, browser, screenshots) -> list[Visit]:
    """Every page at both widths in light mode, and at 1280 px in dark mode."""
    pages = built_pages(site)
    records = []
    for width in WIDTHS:
        records += visit_all(browser, base_url, pages, width, "light", screenshots, site)
    content = [page for page in pages if not page.startswith("_modules")]
    records += visit_all(browser, base_url, content, 1280, "dark", screenshots, site)
    return records


def report(problems: list[str]) -> str:
    return "\n".join(problems[:60]) + (
        f"\n... and {len(problems) - 60} more" if len(problems) > 60 else ""
    )


def test_the_site_has_the_expected_pages(site):
    pages = built_pages(site)
    for page in ["docs/index.html", "docs/reference.html", "docs/run_it_yourself.html"]:
        assert page in pages
    for guide in GUIDES:
        assert f"guides/{guide}.html" in pages


def test_the_reference_documents_every_snippet_module(site):
    """Every module with code of its own, but a private one (``_NAME``)."""
    paths = [p for p in (ROOT / "snippets").rglob("*.py") if not p.stem.startswith("_")]
    modules = [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in paths]
    page = (site / "docs" / "reference.html").read_text()
    missing = [m for m in modules if f'id="module-{m}"' not in page]
    assert not missing, f"docs/reference.md has no automodule for {missing}"


def test_the_landing_page_and_the_guides_index_name_every_guide(visits):
    def text(page):
        return next(v.text for v in visits if v.page == page and v.width == 1280)

    titles = {
        page: text(page).strip().splitlines()[0].strip().rstrip("#").strip()
        for page in {v.page for v in visits}
        if page.startswith("guides/") and page != "guides/index.html"
    }
    landing = " ".join(text("docs/index.html").split())
    index = " ".join(text("guides/index.html").split())
    missing = [title for title in titles.values() if title not in landing or title not in index]
    assert not missing, (
        f"not named on the landing page's Guides card or the guides index: {missing}"
    )


def test_no_request_leaves_the_host(visits):
    problems = [f"{v.where}: requested {url}" for v in visits for url in v.offhost_requests]
    assert not problems, report(problems)


def test_no_console_errors_and_no_failed_requests(visits):
    problems = []
    for v in visits:
        for message in v.console_errors + v.failed_responses:
            if not any(re.search(pattern, message) for pattern in KNOWN_CONSOLE_ERRORS):
                problems.append(f"{v.where}: {message}")
    assert not problems, report(problems)


def test_every_link_and_anchor_resolves(visits, site):
    ids = {urlparse(v.url).path: set(v.ids) for v in visits}
    problems = []
    for v in visits:
        if v.width != WIDTHS[0] or v.scheme != "light":
            continue
        for link in v.links:
            parsed = urlparse(link)
            if parsed.scheme in ("javascript", "mailto") or not local_host(link):
                continue
            path = unquote(parsed.path)
            target = site / path.lstrip("/")
            if path.endswith("/"):
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{v.where}: link to missing {path}")
            elif (
                parsed.fragment
                and path.endswith(".html")
                and unquote(parsed.fragment) not in ids.get(path, set())
            ):
                problems.append(f"{v.where}: anchor #{parsed.fragment} not on {path}")
    assert not problems, report(problems)


def test_every_image_loads_and_has_alt_text(visits):
    problems = [
        f"{v.where}: image {i['src']} {'has no alt text' if i['loaded'] else 'did not load'}"
        for v in visits
        for i in v.images
        if not i["loaded"] or ("/_images/" in i["src"] and not i["alt"].strip())
    ]
    assert not problems, report(problems)


def test_no_page_is_wider_than_the_screen(visits):
    problems = [
        f"{v.where}: page is {v.page_width} px wide" for v in visits if v.page_width > v.width
    ]
    assert not problems, report(problems)


def test_inline_code_wraps_only_between_words(visits):
    """A long flag name wraps after one of its underscores (docs/_ext/code_breaks.py), never
    between two of its letters: ``lm_head_weight_grad_in_kernel_`` / ``order`` on a phone."""
    problems = [
        f"{v.where}: inline code wraps mid-word: {where}"
        for v in visits
        if v.scheme == "light"
        for where in v.mid_word_breaks
    ]
    assert not problems, report(problems)


def test_no_code_block_scrolls_sideways_at_1280(visits):
    problems = [
        f"{v.where}: code block scrolls sideways: {first_line!r}"
        for v in visits
        if v.width == 1280 and not v.page.startswith("_modules")
        for first_line in v.wide_code
    ]
    assert not problems, report(problems)


def test_no_raw_markup(visits):
    problems = [
        f"{v.where}: shows raw markup {marker!r}"
        for v in visits
        for marker in RAW_MARKUP
        if v.scheme == "light" and marker in v.text
    ]
    assert not problems, report(problems)


def test_no_output_shows_a_temporary_path(visits):
    """Nor this checkout's path: a reader's machine has neither."""
    pattern = re.compile(rf"/tmp/|/var/folders/|\\Temp\\|{re.escape(str(ROOT))}")
    problems = [
        f"{v.where}: shows a temporary path: {match.group(0)!r}"
        for v in visits
        if v.scheme == "light" and not v.page.startswith("_modules")
        for match in [pattern.search(v.text)]
        if match
    ]
    assert not problems, report(problems)


def test_figure_text_is_at_least_10_px_on_a_phone(visits, site):
    checked, problems = 0, []
    for v in visits:
        if v.width != 390:
            continue
        for image in v.images:
            path = site / unquote(urlparse(image["src"]).path).lstrip("/")
            if path.suffix != ".png" or not path.is_file():
                continue
            if METADATA_KEY not in (text := Image.open(path).text):
                continue  # not a figure drawn by snippets.figures
            meta = json.loads(text[METADATA_KEY])
            px = meta["min_font_pt"] / 72 * meta["dpi"] * image["shown"] / image["natural"]
            checked += 1
            if px < MIN_FIGURE_TEXT_PX:
                problems.append(f"{v.where}: {path.name} text is {px:.1f} px")
    assert checked >= 3, "expected the three glued figures"
    assert not problems, report(problems)


def test_search_finds_the_shard_mode_guide_with_page_text_excerpts(browser, base_url):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    tab.goto(f"{base_url}/search.html?q=Sharding")
    tab.wait_for_function(
        "() => /finished/i.test(document.querySelector('.search-summary')?.textContent || '')",
        timeout=30_000,
    )
    tab.wait_for_function(
        "() => [...document.querySelectorAll('#search-results li.kind-text')].every("
        "(li) => li.querySelector('p.context'))",
        timeout=30_000,
    )
    results = tab.eval_on_selector_all(
        "#search-results li.kind-text",
        "items => items.map(li => ({href: li.querySelector('a').href,"
        " excerpt: (li.querySelector('p.context') || {}).textContent || ''}))",
    )
    context.close()
    assert any(
        r["href"].split("#")[0].endswith("guides/shard_mode_performance.html") for r in results
    )
    for r in results:
        assert "System Settings" not in r["excerpt"], f"theme words in the excerpt of {r['href']}"
        assert r["excerpt"].strip(), f"empty excerpt for {r['href']}"


def test_each_screen_shows_one_search(visits):
    """One search control per page and width: two (a header field beside the sidebar's) is
    clutter, none leaves the reader without search."""
    problems = [f"{v.where}: {v.searches} search controls" for v in visits if v.searches != 1]
    assert not problems, report(problems)


@pytest.mark.parametrize("width", WIDTHS)
def test_the_search_control_finds_pages(browser, base_url, width):
    """The landing page's search control opens a field whose query lands on results."""
    context = browser.new_context(viewport={"width": width, "height": HEIGHTS[width]})
    tab = context.new_page()
    tab.goto(f"{base_url}/docs/index.html", wait_until="load")
    tab.locator(".search-button__button:visible").click()
    field = tab.locator("#pst-search-dialog input[name=q]")
    field.fill("Sharding")
    field.press("Enter")
    tab.wait_for_url("**/search.html?q=Sharding*")
    tab.wait_for_function(
        "() => /finished/i.test(document.querySelector('.search-summary')?.textContent || '')",
        timeout=30_000,
    )
    found = tab.locator("#search-results li").count()
    context.close()
    assert found, f"searching from the landing page at {width} px found nothing"


def test_each_guide_links_its_executed_notebook(visits, site):
    for guide in GUIDES:
        (v,) = [
            v
            for v in visits
            if v.page == f"guides/{guide}.html" and v.width == 1280 and v.scheme == "light"
        ]
        notebooks = [link for link in v.links if urlparse(link).path.endswith(".ipynb")]
        assert notebooks, f"{v.where}: no .ipynb link"
        path = site / unquote(urlparse(urljoin(v.url, notebooks[0])).path).lstrip("/")
        notebook = json.loads(path.read_text())
        outputs = [
            o for c in notebook["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
        ]
        assert outputs, f"{path.name} has no outputs"
        # The page's figures are the notebook's: the same PNG bytes, from the same execution.
        pngs = {
            o["data"]["image/png"].replace("\n", "")
            for o in outputs
            if "image/png" in o.get("data", {})
        }
        for image in v.images:
            image_path = site / unquote(urlparse(image["src"]).path).lstrip("/")
            if "/_images/" in image["src"] and image_path.suffix == ".png":
                encoded = base64.b64encode(image_path.read_bytes()).decode()
                assert encoded in pngs, f"{v.where}: figure {image_path.name} is not in {path.name}"


def test_the_site_opens_from_file_urls(browser, site):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: m.type == "error" and errors.append(m.text))
    tab.goto((site / "index.html").as_uri())
    tab.wait_for_url("**/docs/index.html")
    tab.goto((site / "guides" / "shard_mode_performance.html").as_uri())
    loaded = tab.evaluate("() => [...document.images].every(i => i.complete && i.naturalWidth > 0)")
    context.close()
    assert loaded
    assert not [e for e in errors if not any(re.search(p, e) for p in KNOWN_CONSOLE_ERRORS)], errors


LENGTH_LIMITS = {
    # +100 words, +1 screen for the TPU compiler's own program (issue 49), the page's one TPU fact
    # not quoted from a source.
    "guides/shard_mode_performance.html": {"words": 3500, "phone_screens": 21},
    "guides/reduce_scatter.html": {"words": 3000},
    "guides/choosing_a_mode.html": {"words": 2600},
}
"""Pages with a length budget: words outside collapsed dropdowns, and 390 x 844 px screens."""


def page_lengths(visits: list[Visit]) -> dict[str, dict[str, float]]:
    """Each content page's words outside collapsed dropdowns and its height in phone screens."""
    return {
        v.page: {"words": v.words, "phone_screens": round(v.height / HEIGHTS[390], 1)}
        for v in visits
        if v.width == 390 and v.scheme == "light" and not v.page.startswith("_modules")
    }


def test_pages_stay_within_their_length_budgets(visits, pytestconfig):
    lengths = page_lengths(visits)
    pytestconfig.stash[PAGE_LENGTHS] = lengths  # printed at the end of the run (conftest.py)
    problems = [
        f"{page}: {lengths[page][measure]} {measure.replace('_', ' ')}, budget {limit}"
        for page, limits in LENGTH_LIMITS.items()
        for measure, limit in limits.items()
        if lengths[page][measure] > limit
    ]
    assert not problems, report(problems)


def committed_external_links() -> set[str]:
    """The addresses in ``docs/external_links.txt`` (each line's first field)."""
    lines = (ROOT / "docs" / "external_links.txt").read_text().splitlines()
    return {
        line.split()[0].rstrip("/") for line in lines if line.strip() and not line.startswith("#")
    }


def external_links(visit: Visit) -> set[str]:
    """The links on a page that leave this site, fragments dropped."""
    return {
        link.split("#")[0].rstrip("/")
        for link in visit.links
        if urlparse(link).scheme in ("http", "https") and not local_host(link)
    }


def test_every_external_link_is_in_the_committed_list(visits, pytestconfig):
    pages = [v for v in visits if v.width == 1280 and v.scheme == "light"]
    pytestconfig.stash[EXTERNAL_LINKS] = {v.page: sorted(external_links(v)) for v in pages}
    listed = committed_external_links()
    problems = [
        f"{v.page}: {link} is not in docs/external_links.txt"
        for v in pages
        for link in sorted(external_links(v) - listed)
    ]
    assert not problems, report(problems)


def test_no_table_overflows_on_a_phone_unless_its_first_column_is_sticky(visits):
    problems = [
        f"{v.where}: table '{table['head']}' overflows and its first column scrolls away"
        for v in visits
        if v.width == 390
        for table in v.tables
        if table["overflows"] and not table["sticky"]
    ]
    assert not problems, report(problems)
