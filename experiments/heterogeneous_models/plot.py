"""Accuracy of each width rate's submodel, per arm of a study (summary.json's per-rate accuracy).

python experiments/heterogeneous_models/plot.py RUNS_DIR [OUT.png]

One line per arm (the folder two levels above each run's summary.json:
RUNS_DIR/<scenario>_<fleet>/<arm>/<seed>/, named relative to the folder
given), the mean over its completed seeds; a table of the same numbers is
printed. Runs without per-rate accuracy (plain FedAvg) are listed with their
whole-model accuracy only. Colours are the algorithm's (as in table.py's
figure), line styles the rate policy's.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

if __package__ in (None, ""):
    # Run as a script: the repository root, not this folder, must be importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from experiments.heterogeneous_models.table import FAMILY_COLOURS  # noqa: E402
from fedbench.analyze.style import rate_label  # noqa: E402

# deadline solid, budget dashed; the FedAvg arms (one colour) by what sets them apart
LINE_STYLES = {"deadline": "-", "budget": "--", "planner": ":", "smallest": "-."}


def collect(root: Path) -> dict[str, dict[float, list[float]]]:
    arms: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for summary in sorted(root.rglob("summary.json")):
        data = json.loads(summary.read_text())
        if data.get("status") != "completed":
            print(f"plot.py: left out {summary.parent} ({data.get('status')})", file=sys.stderr)
            continue
        arm = summary.parent.parent.relative_to(root).as_posix()
        per_rate = data.get("final_accuracy_per_rate") or {}
        if not per_rate and data.get("final_accuracy") is not None:
            per_rate = {"1": data["final_accuracy"]}
        for rate, acc in per_rate.items():
            arms[arm][float(rate)].append(float(acc))
    return arms


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root = Path(argv[0])
    out = Path(argv[1]) if len(argv) > 1 else root / "accuracy_per_rate.png"
    arms = collect(root)
    if not arms:
        print(f"{root}: no summary.json under it", file=sys.stderr)
        return 2
    fig, ax = plt.subplots(figsize=(7.5, 4))
    print(
        f"{'arm':40s} "
        + " ".join(f"r={r:<7g}" for r in sorted({r for a in arms.values() for r in a}))
    )
    for arm, rates in sorted(arms.items()):
        xs = sorted(rates)
        ys = [100 * sum(rates[r]) / len(rates[r]) for r in xs]
        name = arm.rsplit("/", 1)[-1]
        ax.plot(
            xs,
            ys,
            marker="o",
            label=arm,
            color=FAMILY_COLOURS.get(name.split("_")[0], "#555555"),
            linestyle=LINE_STYLES.get(name.rsplit("_", 1)[-1], "-"),
        )
        print(f"{arm:40s} " + " ".join(f"{y:8.2f}%" for y in ys))
    ax.set_xscale("log", base=2)
    ticks = sorted({r for a in arms.values() for r in a})
    ax.set_xticks(ticks, [rate_label(r).replace(" (whole model)", "") for r in ticks])
    ax.minorticks_off()
    ax.set_xlabel("width rate of the evaluated submodel")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Final test accuracy of each rate's submodel (mean over seeds)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1, 0.5))
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
