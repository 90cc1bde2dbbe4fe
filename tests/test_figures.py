"""Figures come from the same execution as the numbers beside them, and the page shows that one.

The guides glue a :class:`snippets.figures.DataFigure` whose PNG carries the numbers it
draws. These tests read the executed notebooks this run's site build rendered its pages from: the
step-time figure must carry exactly the ratios of the timing table in the same
notebook, and every page must show the very PNGs its notebook holds.
"""

from __future__ import annotations

import base64
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from PIL import Image

from snippets.figures import (
    METADATA_KEY,
    MIN_FONT_PT,
    exchange_figure,
    pass_window_figure,
    source_tpu_figure,
)
from snippets.hlo.reduce_scatter import walkthrough
from tests.guide_runner import guide_paths

GUIDES = Path(__file__).resolve().parent.parent / "guides"


def png_metadata(png: bytes) -> dict:
    """What a DataFigure wrote into its PNG: ``data``, ``dpi``, ``min_font_pt``."""
    return json.loads(Image.open(io.BytesIO(png)).text[METADATA_KEY])


def glued_figures(notebook: nbformat.NotebookNode) -> dict[str, bytes]:
    """Every glued PNG in ``notebook``, by glue name."""
    figures = {}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            name = output.get("metadata", {}).get("scrapbook", {}).get("name")
            data = output.get("data", {})
            if name and "image/png" in data:
                figures[name] = base64.b64decode(data["image/png"])
    return figures


def markdown_tables(notebook: nbformat.NotebookNode) -> list[list[dict[str, str]]]:
    """Every Markdown table in the cell outputs, as rows of ``{column title: cell}``."""
    tables = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            text = output.get("data", {}).get("text/markdown", "")
            lines = [line for line in text.splitlines() if line.startswith("|")]
            if len(lines) < 3:
                continue
            split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
            tables.append([dict(zip(split[0], row, strict=True)) for row in split[2:]])
    return tables


def executed(built_site, name: str) -> nbformat.NotebookNode:
    return nbformat.read(built_site.executed_notebook(GUIDES / f"{name}.md"), as_version=4)


def test_step_time_figure_draws_the_table_beside_it(built_site):
    notebook = executed(built_site, "shard_mode_performance")
    drawn = png_metadata(glued_figures(notebook)["step_time_ratios"])["data"]
    (table,) = [t for t in markdown_tables(notebook) if "ratio to auto EV [min, max]" in t[0]]
    assert [(r["mode"], r["variant"]) for r in table] == [(d["mode"], d["variant"]) for d in drawn]
    for row, bar in zip(table, drawn, strict=True):
        expected = f"{bar['ratio_to_auto_EV']:.3f} [{bar['ratio_min']:.3f}, {bar['ratio_max']:.3f}]"
        assert row["ratio to auto EV [min, max]"] == expected, f"{row} is not the bar {bar}"


def test_pass_window_figure_draws_the_printed_window(built_site):
    notebook = executed(built_site, "shard_mode_performance")
    drawn = png_metadata(glued_figures(notebook)["pass_window"])["data"]["cpu"]
    printed = [
        output["data"]["text/plain"]
        for cell in notebook.cells
        if cell.source.startswith("from snippets.hlo.barrier import pass_window")
        for output in cell.outputs
        if output.get("output_type") == "execute_result"
    ]
    assert printed, "the window cell printed nothing"
    for key in ("first_spmd_partitioner", "first_algsimp"):
        assert re.search(rf"'{key}': {drawn[key]}\b", printed[0]), (key, printed[0])


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.sources.append(dict(attrs).get("src", ""))


@pytest.mark.parametrize("guide", guide_paths(), ids=lambda p: p.stem)
def test_each_page_shows_its_notebooks_figures(built_site, guide):
    notebook = nbformat.read(built_site.executed_notebook(guide), as_version=4)
    figures = glued_figures(notebook)
    page = built_site.html / "guides" / f"{guide.stem}.html"
    parser = _Images()
    parser.feed(page.read_text())
    shown = {(page.parent / src).resolve().read_bytes() for src in parser.sources if src}
    for name, png in figures.items():
        meta = png_metadata(png)
        assert meta["min_font_pt"] >= MIN_FONT_PT, f"{guide.stem}: {name} has small text"
        assert png in shown, f"{guide.stem}: the page does not show the executed {name!r}"


def test_exchange_figure_draws_the_sums_and_the_all_reduce():
    report = walkthrough(2)
    drawn = png_metadata(exchange_figure(report).png())["data"]
    assert drawn["sums"] == [
        {"terms": [[5, 6], [14, 16]], "total": [19, 22]},
        {"terms": [[15, 18], [28, 32]], "total": [43, 50]},
    ]
    assert drawn["all_reduced"] == [[[19, 22], [43, 50]]] * 2
    assert drawn["bytes_per_rank"] == {"reduce_scatter": 8, "all_reduce": 16}
    assert [(t["source"], t["target"]) for t in drawn["transfers"]] == [(0, 1), (1, 0)]


def test_exchange_figure_draws_two_ranks_only():
    with pytest.raises(ValueError, match="draws two ranks; this report has 4"):
        exchange_figure({"ranks": 4})


def test_the_source_figure_gives_back_the_prs_quoted_penalties():
    """The PR quotes +9.34% / -0.23% (dp4) and +1.56% / +0.56% (emb4096); the guide repeats them."""
    penalties = {row.pop("config"): row for row in source_tpu_figure().data}
    assert penalties == {
        "dp4": {"explicit [E,V]": 9.34, "explicit [V,E]": -0.23},
        "emb4096": {"explicit [E,V]": 1.56, "explicit [V,E]": 0.56},
    }


@pytest.mark.parametrize(
    ("partitioner_first", "order"),
    [(True, ["spmd-partitioning", "algsimp"]), (False, ["algsimp", "spmd-partitioning"])],
)
def test_pass_window_figure_draws_the_cpu_passes_in_the_order_they_ran(partitioner_first, order):
    window = {
        "partitioner_pass": "spmd-partitioning",
        "first_spmd_partitioner": 3,
        "first_algsimp": 7,
        "partitioner_first": partitioner_first,
    }
    (ax,) = pass_window_figure(window).figure.axes
    cpu_row = sorted(  # the CPU's two pass boxes, at y = 5, left to right
        (text.get_position()[0], text.get_text().split("\n")[0])
        for text in ax.texts
        if text.get_position()[1] == 5.0 and text.get_text()  # not the arrow
    )
    assert [name for _, name in cpu_row] == order
