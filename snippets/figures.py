"""Figures the guides draw from executed results, glued into the page by myst-nb.

Each function returns a :class:`DataFigure`: a matplotlib figure together with
the numbers it draws. A guide glues it with myst-nb's ``glue("name", figure)``
in the cell that computed those numbers and places it with a ``glue:figure``
directive, so the figure is stored in that cell's outputs, from the same
execution as the table beside it. Nothing
is written to disk: a figure file read by a later build can go stale against a
cached table, and one did.

The PNG a ``DataFigure`` displays as carries its numbers, the resolution and the
smallest font size in a text chunk (:func:`png_metadata` reads it back), so a test
can check a figure against its table and a browser test can check the rendered
text size.
"""

from __future__ import annotations

import io
import json
import textwrap
import zlib
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

DPI = 150
"""Resolution of the displayed PNG: 1 inch of figure is 150 image pixels."""

WIDTH_IN = 4.6
"""Figure width in inches: narrow enough that 10 pt text stays readable on a phone."""

MIN_FONT_PT = 10.0
"""The smallest font size a figure may use. At :data:`WIDTH_IN` inches shown on a 390 px
wide screen (about 340 px of content), 10 pt is about 10 CSS px."""

METADATA_KEY = "shard-perf-docs"
"""The PNG text chunk holding a figure's numbers, resolution and smallest font size."""


class DataFigure:
    """A matplotlib figure and the numbers it draws; IPython displays it as a PNG.

    >>> figure = DataFigure(Figure(figsize=(WIDTH_IN, 1)), {"ratio": 1.0})
    >>> png_metadata(figure.png())["data"]
    {'ratio': 1.0}
    """

    def __init__(self, figure: Figure, data: Any):
        small = smallest_font_pt(figure)
        if small < MIN_FONT_PT:
            raise ValueError(
                f"A figure uses {small} pt text; the guides need at least {MIN_FONT_PT} pt so it "
                "stays readable on a phone. Enlarge the font or shorten the label."
            )
        self.figure = figure
        self.data = data

    def png(self) -> bytes:
        """The figure as PNG bytes, with the numbers in a text chunk."""
        width, height = self.figure.get_size_inches()
        meta = {"data": self.data, "dpi": DPI, "min_font_pt": smallest_font_pt(self.figure)}
        meta["width_in"], meta["height_in"] = float(width), float(height)
        buffer = io.BytesIO()
        self.figure.savefig(
            buffer,
            format="png",
            dpi=DPI,
            metadata={METADATA_KEY: json.dumps(meta, sort_keys=True), "Software": None},
        )
        return buffer.getvalue()

    def _repr_png_(self) -> bytes:
        return self.png()

    def __repr__(self) -> str:
        return f"<DataFigure {self.figure.get_size_inches().tolist()} in, data={self.data!r}>"


def smallest_font_pt(figure: Figure) -> float:
    """The smallest font size, in points, of any visible non-empty text in ``figure``."""
    sizes = [
        text.get_fontsize()
        for text in figure.findobj(Text)
        if text.get_visible() and text.get_text().strip()
    ]
    return min(sizes, default=MIN_FONT_PT)


def png_metadata(png: bytes) -> dict:
    """The metadata a :class:`DataFigure` wrote into its PNG (``data``, ``dpi``, ``min_font_pt``)."""
    position = 8  # after the PNG signature
    while position < len(png):
        length = int.from_bytes(png[position : position + 4], "big")
        kind = png[position + 4 : position + 8]
        body = png[position + 8 : position + 8 + length]
        position += 12 + length
        key, _, value = body.partition(b"\0")
        if kind == b"tEXt" and key == METADATA_KEY.encode():
            return json.loads(value.decode("latin-1"))
        if kind == b"zTXt" and key == METADATA_KEY.encode():
            return json.loads(zlib.decompress(value[1:]).decode("latin-1"))
    raise ValueError(f"This PNG has no {METADATA_KEY!r} text chunk: it was not made by DataFigure.")


def _figure(height_in: float) -> Figure:
    figure = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained")
    figure.set_facecolor("white")
    return figure


def _matrix_text(rows: Sequence[Sequence[float]]) -> str:
    return "\n".join("[" + ", ".join(f"{v:g}" for v in row) + "]" for row in rows)


def _sum_text(terms: Sequence[Sequence[float]], total: Sequence[float]) -> str:
    """``[5, 6] + [14, 16]`` over ``= [19, 22]``: a finished row as the sum of its partial rows."""
    return " + ".join(_matrix_text([row]) for row in terms) + "\n= " + _matrix_text([total])


def _rank_boxes(ax, y: float, texts: Sequence[str]) -> None:
    """One rounded box per rank at height ``y``, rank 0 left and rank 1 right."""
    for rank, (x, text) in enumerate(zip(EXCHANGE_COLUMNS, texts, strict=True)):
        ax.text(
            x, y, text, ha="center", va="center", fontsize=10, family="monospace",
            bbox={"boxstyle": "round", "facecolor": ("#dbe9f6", "#fde2cf")[rank], "edgecolor": "0.5"},
        )  # fmt: skip


EXCHANGE_COLUMNS = (2.4, 7.6)
"""Where rank 0's and rank 1's boxes sit in the exchange figure (axes run from 0 to 10)."""


def exchange_figure(report: dict) -> DataFigure:
    """The two-rank finish of ``reduce_scatter.walkthrough()``: reduce-scatter, then all-reduce.

    The reduce-scatter panel shows each payload on its way to the row's owner and
    the addition the owner does; the all-reduce panel shows what the alternative
    leaves on each rank and what it sends.
    """
    if report["ranks"] != 2:
        raise ValueError(f"The exchange figure draws two ranks; this report has {report['ranks']}.")
    partials, shards = report["partials"], report["shards"]
    sums = [
        {"terms": [partial[rank] for partial in partials], "total": shards[rank][0]}
        for rank in range(2)
    ]
    sent = {
        "reduce_scatter": report["bytes_per_rank"]["reduce_scatter"],
        "all_reduce": report["hlo_bytes_per_rank"]["all_reduce"],
    }
    figure = _figure(5.0)
    ax = figure.add_subplot()
    ax.set(xlim=(0, 10), ylim=(0.6, 11.2))
    ax.axis("off")
    ax.text(5.0, 10.8, f"reduce-scatter: {sent['reduce_scatter']:g} B sent per rank",
            ha="center", fontsize=11, weight="bold")  # fmt: skip
    for rank, x in enumerate(EXCHANGE_COLUMNS):
        ax.text(x, 10.0, f"rank {rank}: C_{rank}", ha="center", fontsize=10, color="0.3")
    _rank_boxes(ax, 8.9, [_matrix_text(partial) for partial in partials])
    transfers = [t for t in report["transfers"] if t["step"] == "reduce-scatter"]
    for offset, send in zip((0.55, -0.55), transfers, strict=True):
        start, end = EXCHANGE_COLUMNS[send["source"]], EXCHANGE_COLUMNS[send["target"]]
        shift = 1.2 if start < end else -1.2
        color = ("#1f77b4", "#d62728")[send["source"]]
        y = 7.0 + offset
        ax.annotate(
            "", xy=(end - shift, y), xytext=(start + shift, y),
            arrowprops={"arrowstyle": "->", "color": color},
        )  # fmt: skip
        row = partials[send["source"]][send["rows"][0]]
        ax.text(5.0, y + 0.1, f"{_matrix_text([row])} {send['bytes']} B", ha="center",
                va="bottom", fontsize=10, color=color)  # fmt: skip
    _rank_boxes(ax, 5.2, [_sum_text(s["terms"], s["total"]) for s in sums])
    ax.axhline(4.0, color="0.7", linewidth=0.8)
    ax.text(5.0, 3.4, f"all-reduce instead: {sent['all_reduce']:g} B sent per rank",
            ha="center", fontsize=11, weight="bold")  # fmt: skip
    _rank_boxes(ax, 1.9, ["C_0 + C_1 =\n" + _matrix_text(c) for c in report["all_reduced"]])
    data = {
        "partials": partials,
        "sums": sums,
        "all_reduced": report["all_reduced"],
        "bytes_per_rank": sent,
        "transfers": transfers,
    }
    return DataFigure(figure, data)


TPU_PASS_WINDOW = {"algsimp": (8, 9), "spmd-partitioner": (12, 16)}
"""Pass positions the source PR reports for its TPU compile (simplification-1 at 0008-0009,
the partitioner at 0012-0016). Quoted, not measured here."""


def pass_window_figure(cpu_window: dict) -> DataFigure:
    """Where the fold can fire: this backend's measured pass order beside the source's TPU order."""
    cpu = {
        "spmd-partitioner": (cpu_window["first_spmd_partitioner"],) * 2,
        "algsimp": (cpu_window["first_algsimp"],) * 2,
    }
    rows = [
        ("CPU, measured in this build", cpu),
        ("TPU, as reported by the source PR", TPU_PASS_WINDOW),
    ]
    colors = {"algsimp": "#2ca02c", "spmd-partitioner": "#d62728"}
    figure = _figure(4.4)
    axes = figure.subplots(2, 1)
    for ax, (title, passes) in zip(axes, rows, strict=True):
        end = max(stop for _, stop in passes.values()) + 3
        ax.set(xlim=(0, end), ylim=(0, 1.6), yticks=[])
        ax.set_title(title, fontsize=11, loc="left")
        ax.set_xlabel("position in the pass dump", fontsize=10)
        ax.tick_params(axis="x", labelsize=10)
        for name, (start, stop) in passes.items():
            ax.broken_barh([(start - 0.4, stop - start + 0.8)], (0.15, 0.5), color=colors[name])
            ax.text((start + stop) / 2, 0.75, name, ha="center", va="bottom", fontsize=10)
        fold_first = passes["algsimp"][0] < passes["spmd-partitioner"][0]
        note = (
            "algsimp first: the fold fires unless a Sharding call is in the way"
            if fold_first
            else "partitioner first: an all-reduce is already between dot and transpose"
        )
        ax.text(0.3, 1.2, textwrap.fill(note, 60), va="center", fontsize=10, color="0.25")
    data = {"cpu": cpu_window, "tpu_quoted": TPU_PASS_WINDOW}
    return DataFigure(figure, data)


def ratio_figure(rows: Sequence[dict]) -> DataFigure:
    """Step-time ratios to auto/EV, median with min-max whiskers, one bar per (mode, variant)."""
    figure = _figure(1.4 + 0.4 * len(rows))
    ax = figure.add_subplot()
    colors = {"explicit": "#1f77b4", "auto": "#ff7f0e"}
    medians = [r["ratio_to_auto_EV"] for r in rows]
    errors = [
        [m - r["ratio_min"] for m, r in zip(medians, rows, strict=True)],
        [r["ratio_max"] - m for m, r in zip(medians, rows, strict=True)],
    ]
    positions = range(len(rows))[::-1]  # first row on top, as in the table
    ax.barh(positions, medians, xerr=errors, capsize=3, color=[colors[r["mode"]] for r in rows])
    ax.set_yticks(list(positions), [r["variant"] for r in rows], fontsize=11)
    for y, median, row in zip(positions, medians, rows, strict=True):
        ax.text(row["ratio_max"] + 0.03, y, f"{median:.3f}", va="center", fontsize=11)
    ax.axvline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xlim(0, max(r["ratio_max"] for r in rows) * 1.3)
    ax.set_xlabel("step time / auto EV step time", fontsize=11)
    ax.tick_params(axis="x", labelsize=11)
    handles = [Patch(color=color, label=f"{mode} mode") for mode, color in colors.items()]
    figure.legend(handles=handles, fontsize=11, loc="outside upper center", ncols=2, frameon=False)
    keys = ("mode", "variant", "ratio_to_auto_EV", "ratio_min", "ratio_max")
    return DataFigure(figure, [{key: row[key] for key in keys} for row in rows])
