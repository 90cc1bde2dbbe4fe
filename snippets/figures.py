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
