"""Figures the guides glue (myst-nb) in the cell that computed their numbers, never a stale file;
each :class:`DataFigure`'s PNG carries those numbers (:data:`METADATA_KEY`) for the tests."""

from __future__ import annotations

import dataclasses
import io
import json
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.text import Text

from snippets.sources import SOURCE_TPU_RESULTS, TPU_PASS_WINDOW

DPI = 150
"""Resolution of the displayed PNG: 1 inch of figure is 150 image pixels."""

WIDTH_IN = 4.6
"""Figure width in inches: narrow enough that 10 pt text stays readable on a phone."""

MIN_FONT_PT = 10.0
"""The smallest font size a figure may use: about 10 CSS px on a 390 px wide phone screen."""

METADATA_KEY = "shard-perf-docs"
"""The PNG text chunk holding a figure's numbers, resolution and smallest font size."""


@dataclasses.dataclass(frozen=True)
class DataFigure:
    """A matplotlib figure and the numbers it draws; IPython displays it as a PNG."""

    figure: Figure = dataclasses.field(repr=False)
    data: Any

    def __post_init__(self) -> None:
        if (small := smallest_font_pt(self.figure)) < MIN_FONT_PT:
            raise ValueError(
                f"A figure uses {small} pt text; the guides need at least {MIN_FONT_PT} pt so it "
                "stays readable on a phone. Enlarge the font or shorten the label."
            )

    def png(self) -> bytes:
        """The figure as PNG bytes, its numbers, resolution and smallest font in a text chunk."""
        meta = {"data": self.data, "dpi": DPI, "min_font_pt": smallest_font_pt(self.figure)}
        buffer = io.BytesIO()
        metadata = {METADATA_KEY: json.dumps(meta, sort_keys=True), "Software": None}
        self.figure.savefig(buffer, format="png", dpi=DPI, metadata=metadata)
        return buffer.getvalue()

    _repr_png_ = png  # how IPython displays it


def smallest_font_pt(figure: Figure) -> float:
    """The smallest font size, in points, of any visible non-empty text in ``figure``."""
    texts = [t for t in figure.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return min((float(text.get_fontsize()) for text in texts), default=MIN_FONT_PT)


def _figure(height_in: float) -> tuple[Figure, Any]:
    figure = Figure(figsize=(WIDTH_IN, height_in), dpi=DPI, layout="constrained", facecolor="white")
    return figure, figure.add_subplot()


def _matrix_text(rows: Sequence[Sequence[float]]) -> str:
    return "\n".join("[" + ", ".join(f"{v:g}" for v in row) + "]" for row in rows)


def _sum_text(terms: Sequence[Sequence[float]], total: Sequence[float]) -> str:
    """``[5, 6] + [14, 16]`` over ``= [19, 22]``: a finished row as the sum of its partial rows."""
    return " + ".join(_matrix_text([row]) for row in terms) + "\n= " + _matrix_text([total])


EXCHANGE_COLUMNS = (2.4, 7.6)
"""Where rank 0's and rank 1's boxes sit in the exchange figure (axes run from 0 to 10)."""


def _rank_boxes(ax, y: float, texts: Sequence[str]) -> None:
    """One rounded box per rank at height ``y``, rank 0 left and rank 1 right."""
    for rank, (x, text) in enumerate(zip(EXCHANGE_COLUMNS, texts, strict=True)):
        ax.text(
            x, y, text, ha="center", va="center", fontsize=10, family="monospace",
            bbox={"boxstyle": "round", "facecolor": ("#dbe9f6", "#fde2cf")[rank], "edgecolor": "0.5"},
        )  # fmt: skip


def exchange_figure(report: dict) -> DataFigure:
    """The two-rank finish of ``reduce_scatter.walkthrough()``: each payload on its way to its
    row's owner and the owner's sum, then what an all-reduce would leave and send instead."""
    if report["ranks"] != 2:
        raise ValueError(f"The exchange figure draws two ranks; this report has {report['ranks']}.")
    partials, shards = report["partials"], report["shards"]
    sums = [{"terms": [p[rank] for p in partials], "total": shards[rank][0]} for rank in range(2)]
    sent = {
        "reduce_scatter": report["bytes_per_rank"]["reduce_scatter"],
        "all_reduce": report["hlo_bytes_per_rank"]["all_reduce"],
    }
    figure, ax = _figure(5.0)
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
    data = {"partials": partials, "sums": sums, "all_reduced": report["all_reduced"]}
    return DataFigure(figure, data | {"bytes_per_rank": sent, "transfers": transfers})


GPU_PASS_ORDER = {"algsimp": "in spmd-simplify", "shardy-xla, then\nspmd-partitioning": ""}
"""XLA:GPU's order as ``xla/service/gpu/gpu_spmd_pipeline.cc`` builds it: read from the source."""


def pass_window_figure(cpu_window: dict) -> DataFigure:
    """Which runs first, the simplifier or the partitioner: CPU measured, TPU quoted, GPU from source
    (order only: the CPU's dump indices and the TPU's pass numbers are different units)."""
    cpu = {
        cpu_window["partitioner_pass"]: f"dump {cpu_window['first_spmd_partitioner']}",
        "algsimp": f"dump {cpu_window['first_algsimp']}",
    }
    folds, gpu_note = "folds unless a Sharding call is in the way", "simplifier first, as on TPU"
    cpu_note = "an all-reduce already stands between dot and transpose"
    if not cpu_window["partitioner_first"]:
        cpu, cpu_note = dict(reversed(cpu.items())), folds
    rows = [
        ("CPU, measured in this build", cpu, cpu_note),
        ("TPU, quoted from MaxText", TPU_PASS_WINDOW, folds),
        ("GPU, read from XLA's source", GPU_PASS_ORDER, gpu_note + " (not run here)"),
    ]
    figure, ax = _figure(4.4)
    ax.set(xlim=(0, 1), ylim=(0.2, 6.0))
    ax.axis("off")
    for y, (title, passes, note) in zip((5.0, 3.0, 1.0), rows, strict=True):
        ax.text(0.0, y + 0.62, title, fontsize=11, weight="bold", va="bottom")
        for x, (name, where) in zip((0.0, 0.55), passes.items(), strict=True):  # in run order
            color = "#2ca02c" if name == "algsimp" else "#d62728"  # the simplifier, a partitioner
            ax.text(
                x, y, f"{name}\n{where}".strip(), fontsize=10, va="center", ha="left",
                bbox={"boxstyle": "round", "facecolor": color, "alpha": 0.25},
            )  # fmt: skip
        ax.annotate("", xy=(0.53, y), xytext=(0.45, y), arrowprops={"arrowstyle": "->"})
        ax.text(0.0, y - 0.5, note, fontsize=10, color="0.25", va="center")
    data = {"cpu": cpu_window, "tpu_quoted": TPU_PASS_WINDOW, "gpu_from_source": GPU_PASS_ORDER}
    return DataFigure(figure, data)


def ratio_figure(rows: Sequence[dict]) -> DataFigure:
    """:func:`snippets.measure.bench.bench`'s step-time ratios to auto/EV: medians, min-max whiskers and
    verdicts in a column right of the axes; a range straddling 1.0 is faded ("no difference")."""
    figure, ax = _figure(1.4 + 0.4 * len(rows))
    colors = {"explicit": "#1f77b4", "auto": "#ff7f0e"}
    labels = ax.get_yaxis_transform()  # x in axes fraction, y in data
    positions = range(len(rows))[::-1]  # first row on top, as in the table
    for y, row in zip(positions, rows, strict=True):
        median, verdict = row["ratio_to_auto_EV"], row["verdict"]
        whisker = [[median - row["ratio_min"]], [row["ratio_max"] - median]]
        alpha = 1.0 if verdict in ("below 1", "above 1") else 0.35
        ax.barh(y, median, xerr=whisker, capsize=3, color=colors[row["mode"]], alpha=alpha)
        label = {
            "below 1": f"{median:.2f}: faster",
            "above 1": f"{median:.2f}: slower",
            "no measurable difference from 1": f"{median:.2f}: no difference",
            "reference": "reference",
        }[verdict]
        ax.text(1.03, y, label, transform=labels, va="center", fontsize=11)
    ax.set_yticks(list(positions), [r["variant"] for r in rows], fontsize=11)
    ax.axvline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_xlim(0, max(r["ratio_max"] for r in rows) * 1.05)
    ax.set_xlabel("step time / auto EV step time (CPU)", fontsize=11)
    ax.tick_params(axis="x", labelsize=11)
    handles = [Patch(color=color, label=f"{mode} mode") for mode, color in colors.items()]
    figure.legend(handles=handles, fontsize=11, loc="outside upper center", ncols=2, frameon=False)
    keys = ("mode", "variant", "ratio_to_auto_EV", "ratio_min", "ratio_max", "verdict")
    return DataFigure(figure, [{key: row[key] for key in keys} for row in rows])


def source_tpu_figure(rows: Sequence[dict] = SOURCE_TPU_RESULTS) -> DataFigure:
    """The source PR's TPU penalties, explicit over auto, before and after its fix: quoted, not ours."""
    colors = {"explicit [E,V]": "#1f77b4", "explicit [V,E]": "#2ca02c"}
    data = [
        {"config": row["config"]} | {v: round(100 * (row[v] / row["auto"] - 1), 2) for v in colors}
        for row in rows
    ]
    figure, ax = _figure(2.9)
    for offset, (variant, color) in zip((0.2, -0.2), colors.items(), strict=True):
        values = [penalty[variant] for penalty in data]
        positions = [len(rows) - 1 - i + offset for i in range(len(rows))]
        ax.barh(positions, values, height=0.38, color=color, label=variant)
        for y, value in zip(positions, values, strict=True):
            ax.text(max(value, 0) + 0.2, y, f"{value:+.2f}%", va="center", fontsize=11)
    ax.set_yticks(range(len(rows))[::-1], [row["config"] for row in rows], fontsize=11)
    ax.axvline(0, color="0.3", linewidth=0.8)
    ax.set_xlim(-1, 12)
    ax.set_xlabel("step time vs auto (%), TPU v5p-8", fontsize=11)
    ax.tick_params(axis="x", labelsize=11)
    ax.set_title("Quoted from the MaxText PR, not measured here", fontsize=11, loc="left")
    figure.legend(fontsize=11, loc="outside upper center", ncols=2, frameon=False)
    return DataFigure(figure, data)
