"""The study's figures: accuracy against virtual time and energy, and who was picked when."""

from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; the analysis runs on headless machines
import matplotlib.pyplot as plt  # noqa: E402 - after the backend choice
import numpy as np  # noqa: E402
from matplotlib.colors import ListedColormap  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from experiments.strategy_study.runs import Run  # noqa: E402
from fedbench.report.records import STATUSES  # noqa: E402

# Heat-map colours: not picked, then one per status in STATUSES order.
STATUS_COLOURS: dict[str, str] = {
    "not picked": "#f4f4f4",
    "ok": "#2a9d8f",
    "oom": "#7b2cbf",
    "dropped": "#8d99ae",
    "timeout": "#f4a261",
    "failed": "#d62828",
}
AXES: dict[str, str] = {
    "time_s": "virtual time in rounds (s)",
    "energy_j": "cumulative energy of all reports (J)",
}


def _by_label(runs: list[Run], named: dict[Path, str]) -> dict[str, list[Run]]:
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in sorted(runs, key=lambda r: r.seed):
        groups[named[run.path]].append(run)
    return dict(sorted(groups.items()))


def accuracy_curves(
    runs: list[Run], named: dict[Path, str], x: str, target: float | None, path: Path
) -> None:
    """Mean over seeds per strategy, evaluation by evaluation; the band is +- 1 std of accuracy."""
    fig, ax = plt.subplots(figsize=(9.5, 4.4))
    for label, members in _by_label(runs, named).items():
        n = min(len(r.evaluations) for r in members)
        xs = np.array([[getattr(e, x) for e in r.evaluations[:n]] for r in members])
        ys = 100.0 * np.array([[e.accuracy for e in r.evaluations[:n]] for r in members])
        mean = ys.mean(axis=0)
        name = textwrap.fill(f"{label} (n={len(members)})", 36)
        (line,) = ax.plot(xs.mean(axis=0), mean, marker=".", label=name)
        if len(members) > 1:
            std = ys.std(axis=0, ddof=1)
            ax.fill_between(
                xs.mean(axis=0), mean - std, mean + std, color=line.get_color(), alpha=0.15
            )
    if target is not None:
        ax.axhline(100.0 * target, color="black", linestyle=":", linewidth=1, label="target")
    ax.set_xlabel(AXES[x])
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(f"{runs[0].experiment}: accuracy vs {AXES[x].split(' (')[0]}")
    ax.grid(alpha=0.3)
    # Outside the axes: the curves of eight strategies leave no empty corner.
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def selection_heatmaps(runs: list[Run], named: dict[Path, str], path: Path) -> None:
    """Per strategy (its lowest seed): devices x rounds, coloured by the report's status."""
    groups = _by_label(runs, named)
    cols = min(len(groups), 4)
    rows = (len(groups) + cols - 1) // cols
    first = next(iter(groups.values()))[0]
    height = 0.16 * len(first.devices) + 1.2
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, height * rows), squeeze=False)
    cmap = ListedColormap(list(STATUS_COLOURS.values()))
    for ax, (label, members) in zip(axes.flat, groups.items(), strict=False):
        run = members[0]
        ax.imshow(
            run.heat,
            aspect="auto",
            cmap=cmap,
            vmin=-0.5,
            vmax=len(STATUSES) + 0.5,
            interpolation="nearest",
            extent=(0.5, run.heat.shape[1] + 0.5, len(run.devices) - 0.5, -0.5),
        )
        ax.set_title(textwrap.fill(f"{label}, seed {run.seed}", 42), fontsize=8)
        ax.set_yticks(range(len(run.devices)))
        ax.set_yticklabels(run.devices, fontsize=5)
        ax.set_xlabel("round", fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(groups) :]:
        ax.axis("off")
    handles = [Patch(color=c, label=s) for s, c in STATUS_COLOURS.items()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8)
    fig.suptitle(f"{first.experiment}: devices picked per round")
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
