"""Figures the guides draw at build time from executed results (matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

FIGURE_DIR = Path(__file__).resolve().parent.parent / "_build" / "figures"
"""Where figures are saved: inside the build directory, never the source tree."""


def _matrix_text(rows: Sequence[Sequence[float]]) -> str:
    return "\n".join("[" + ", ".join(f"{v:g}" for v in row) + "]" for row in rows)


def exchange_figure(report: dict) -> plt.Figure:
    """Who sends what to whom in the two-rank exchange of ``reduce_scatter.walkthrough()``."""
    if report["ranks"] != 2:
        raise ValueError(f"The exchange figure draws two ranks; this report has {report['ranks']}.")
    stages = [
        ("local partial products", report["partials"]),
        ("after reduce-scatter", report["shards"]),
        ("after all-gather", report["gathered"]),
    ]
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    ax.set(xlim=(0, 10), ylim=(0, 10))
    ax.axis("off")
    xs = (2.0, 8.0)
    for rank, x in enumerate(xs):
        ax.text(x, 9.6, f"rank {rank}", ha="center", fontsize=12, weight="bold")
    for level, (label, values) in enumerate(stages):
        y = 8.2 - 3.1 * level
        ax.text(5.0, y + 0.85, label, ha="center", fontsize=9, color="0.35")
        for rank, x in enumerate(xs):
            ax.text(
                x, y, _matrix_text(values[rank]), ha="center", va="center", family="monospace",
                bbox={"boxstyle": "round", "facecolor": ("#dbe9f6", "#fde2cf")[rank], "edgecolor": "0.5"},
            )  # fmt: skip
    arrows = {
        step: [t for t in report["transfers"] if t["step"] == step]
        for step in ("reduce-scatter", "all-gather")
    }
    for level, (step, sends) in enumerate(arrows.items()):
        y = 6.65 - 3.1 * level
        for offset, send in zip((0.25, -0.25), sends, strict=True):
            start, end = xs[send["source"]], xs[send["target"]]
            shift = 1.05 if start < end else -1.05
            ax.annotate(
                "", xy=(end - shift, y + offset), xytext=(start + shift, y + offset),
                arrowprops={"arrowstyle": "->", "color": ("#1f77b4", "#d62728")[send["source"]]},
            )  # fmt: skip
            if step == "reduce-scatter":  # the partial row the target owns
                row = report["partials"][send["source"]][send["rows"][0]]
            else:  # the source's finished row
                row = report["shards"][send["source"]][0]
            ax.text(
                5.0,
                y + offset + 0.12,
                f"{step}: {_matrix_text([row])} ({send['bytes']} B)",
                ha="center",
                fontsize=8,
            )
    fig.tight_layout()
    return fig


def save(fig: plt.Figure, name: str) -> Path:
    """Save ``fig`` as ``_build/figures/NAME.png`` and return the path."""
    FIGURE_DIR.mkdir(parents=True, exist_ok=True)
    path = FIGURE_DIR / f"{name}.png"
    fig.savefig(path, dpi=144, bbox_inches="tight")
    plt.close(fig)
    return path


TPU_PASS_WINDOW = {"algsimp": (8, 9), "spmd-partitioner": (12, 16)}
"""Pass positions the source PR reports for its TPU compile (simplification-1 at 0008-0009,
the partitioner at 0012-0016). Quoted, not measured here."""


def pass_window_figure(cpu_window: dict) -> plt.Figure:
    """Where the fold can fire: this backend's measured pass order beside the source's TPU order."""
    fig, axes = plt.subplots(2, 1, figsize=(8, 3.6), sharex=False)
    cpu = {
        "spmd-partitioner": cpu_window["first_spmd_partitioner"],
        "algsimp": cpu_window["first_algsimp"],
    }
    rows = [
        (axes[0], "CPU, measured in this build", {k: (v, v) for k, v in cpu.items()}),
        (axes[1], "TPU, as reported by the source PR", TPU_PASS_WINDOW),
    ]
    colors = {"algsimp": "#2ca02c", "spmd-partitioner": "#d62728"}
    for ax, title, passes in rows:
        end = max(stop for _, stop in passes.values()) + 3
        ax.set(xlim=(0, end), ylim=(0, 1), yticks=[], title=title)
        ax.set_xlabel("position in the pass dump")
        for name, (start, stop) in passes.items():
            ax.broken_barh([(start - 0.4, stop - start + 0.8)], (0.25, 0.5), color=colors[name])
            ax.text((start + stop) / 2, 0.85, name, ha="center", fontsize=9)
        fold_first = passes["algsimp"][0] < passes["spmd-partitioner"][0]
        note = (
            "algsimp sees dot -> transpose before partitioning: the fold fires unless a Sharding call sits between"
            if fold_first
            else "partitioner first: an all-reduce sits between dot and transpose before algsimp runs"
        )
        ax.text(end / 2, 0.06, note, ha="center", fontsize=8, color="0.3")
    fig.tight_layout()
    return fig


def ratio_figure(rows: Sequence[dict]) -> plt.Figure:
    """Step-time ratios to auto/EV, median with min-max whiskers, one bar per (mode, variant)."""
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    labels = [f"{r['mode']}\n{r['variant']}" for r in rows]
    medians = [r["ratio_to_auto_EV"] for r in rows]
    errors = [
        [m - r["ratio_min"] for m, r in zip(medians, rows, strict=True)],
        [r["ratio_max"] - m for m, r in zip(medians, rows, strict=True)],
    ]
    colors = ["#1f77b4" if r["mode"] == "explicit" else "#ff7f0e" for r in rows]
    ax.bar(labels, medians, yerr=errors, color=colors, capsize=4)
    ax.axhline(1.0, color="0.3", linewidth=0.8, linestyle="--")
    ax.set_ylabel("step time / auto EV")
    ax.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig
