"""Plots of a run (matplotlib, headless)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # no display on servers and in CI
import matplotlib.pyplot as plt  # noqa: E402

if TYPE_CHECKING:
    from fedbench.report.writer import DayResult


def accuracy_vs_day(days: Sequence[DayResult], path: Path, title: str = "") -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([d.day for d in days], [100 * d.accuracy for d in days], marker="o")
    ax.axhline(
        100 * days[0].accuracy,
        color="grey",
        linestyle="--",
        linewidth=1,
        label=f"day 0 (pretrained): {100 * days[0].accuracy:.2f}%",
    )
    ax.set_xlabel("day")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title or "accuracy per day")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
