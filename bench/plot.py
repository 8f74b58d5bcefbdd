"""The PNG of the scaling scenarios: one panel per scenario that has a series."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from .harness import Outcome  # noqa: E402


def plot(outcomes: Mapping[str, Outcome], path: Path, title: str) -> Path | None:
    """Draw every outcome with series and a plot spec; None when there is nothing to draw."""
    panels = [o for o in outcomes.values() if o.series and o.plot]
    if not panels:
        return None
    cols = min(2, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.5 * cols, 4.2 * rows), squeeze=False)
    for ax, outcome in zip(axes.flat, panels, strict=False):
        name, xlabel, ylabel = outcome.plot
        for label, points in outcome.series.items():
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", label=label)
        xs_all = [x for pts in outcome.series.values() for x, _ in pts]
        if min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 50:
            ax.set_xscale("log")
        ax.set_title(name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
