"""What a study writes: one CSV with documented columns, PNG figures, meta.json.

Every study declares its columns with a one-line description
(`Columns`); `write_csv` refuses a row with other keys, so the CSV and its
documentation (experiments/characterization/README.md, generated from the
same declarations by `columns_markdown`) cannot drift apart. A figure the
device cannot produce (NaN, e.g. energy on a host without a power sensor)
is an empty cell, never 0.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Columns = Mapping[str, str]  # column -> what it holds (units in the text)
Row = dict[str, Any]


@dataclass(frozen=True)
class StudyResult:
    study: str
    device: str
    csv: Path
    figures: tuple[Path, ...]
    summary: tuple[str, ...]  # lines for the console and the README comparison
    extra: Mapping[str, Any] = field(default_factory=dict)


def cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not math.isfinite(value) else float(f"{value:.6g}")
    return value


def write_csv(path: Path, columns: Columns, rows: Iterable[Row]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(columns)
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(names)
        for row in rows:
            if set(row) != set(names):
                raise ValueError(
                    f"{path.name}: row keys {sorted(set(row) ^ set(names))} differ from the columns"
                )
            writer.writerow([cell(row[n]) for n in names])
    return path


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def number(text: str) -> float:
    """A CSV cell as a float; an empty cell is NaN."""
    return float(text) if text != "" else math.nan


def write_meta(path: Path, meta: Mapping[str, Any]) -> Path:
    def clean(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, Mapping):
            return {str(k): clean(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [clean(x) for x in v]
        return v if isinstance(v, str | int | float | bool) or v is None else str(v)

    path.write_text(json.dumps(clean(meta), indent=2) + "\n")
    return path


def columns_markdown(columns: Columns) -> str:
    lines = ["| column | meaning |", "|---|---|"]
    lines += [f"| `{name}` | {text} |" for name, text in columns.items()]
    return "\n".join(lines)


def ratio(a: float, b: float) -> float:
    return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


def fmt(value: float, spec: str = ".3g") -> str:
    return "n/a" if not math.isfinite(value) else format(value, spec)


def pyplot() -> Any:
    """matplotlib's pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def finite(values: Sequence[float]) -> bool:
    return any(math.isfinite(v) for v in values)


def legend(ax: Any, fontsize: int = 8, title: str | None = None, loc: str = "best") -> None:
    """A legend if anything was drawn with a label (a device may have measured nothing)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=fontsize, title=title, loc=loc)


def log_y(ax: Any) -> None:
    """A log y axis labelled 0.1, 3, 40 rather than 10^-1, 3 x 10^0: matplotlib labels
    minor ticks too on a span of under a decade, and mathtext powers read badly there."""
    from matplotlib.ticker import LogFormatter

    class Plain(LogFormatter):  # type: ignore[misc]
        # LogFormatter decides which ticks get a label; each is written as a number.
        def __call__(self, x: float, pos: int | None = None) -> str:
            return f"{x:g}" if super().__call__(x, pos) else ""

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(Plain(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(Plain(labelOnlyBase=False, minor_thresholds=(1, 0.4)))


def log2_axis(ax: Any, ticks: Sequence[int]) -> None:
    """A log2 x axis ticked at `ticks` (batch sizes, widths), labelled 1, 2, 4 rather than 2^k."""
    from matplotlib.ticker import NullLocator

    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ticks), [str(t) for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
