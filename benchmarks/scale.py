"""Fleet scale: 1,000 / 10,000 / 100,000 devices, 100 of them per round, side by side.

Each size is one whole run of `python -m fedbench` (start-up included), the
phone market-share fleet scaled to N devices (`fleet=phones_100
+fleet.scale=N`), the small CNN, plain FL rounds, every device holding a
seeded sample of the pool (`data.partition.scheme=sampled`). Measured, per
size, from outside the run:

- time to first round: seconds from launching the command to the end of
  round 1 (its console line);
- server time per round: the server's own seconds per round outside waiting
  for replies (selection, configuring, reading replies, aggregation, ledger,
  records, checkpoint: `server_time_per_round_s` in summary.json), median;
- driver peak RSS: the run process's peak resident memory (VmHWM).

    python benchmarks/scale.py                       # 1k, 10k, 100k
    python benchmarks/scale.py --sizes 1000 --rounds 3

Targets (issue 13): at 100,000 devices, first round within 60 s, server time
per round at most 0.5 s, driver peak RSS at most 2 GB.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

OVERRIDES = [
    "fleet=phones_100",
    "model=small_cnn",
    "scenario=rounds",
    "scenario.pretrain.epochs=0",
    "data.partition.scheme=sampled",
    "data.partition.size=32",
    "report.progress_per_round=true",
    "report.plots=false",
]


@dataclass(frozen=True)
class Result:
    devices: int
    first_round_s: float
    server_s: float  # median server seconds per round
    peak_rss_mb: float
    rounds: int


def _peak_rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def run(devices: int, per_round: int, rounds: int, out: Path) -> Result:
    run_dir = out / f"n{devices}"
    cmd = [
        sys.executable,
        "-m",
        "fedbench",
        *OVERRIDES,
        f"+fleet.scale={devices}",
        f"strategy.clients_per_round={per_round}",
        f"scenario.rounds={rounds}",
        f"hydra.run.dir={run_dir}",
    ]
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    first: list[float] = []
    peak = [0.0]
    lines: list[str] = []

    def watch_memory() -> None:
        while proc.poll() is None:
            peak[0] = max(peak[0], _peak_rss_mb(proc.pid))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch_memory, daemon=True)
    watcher.start()
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        if not first and line.startswith("[fedbench] round 1"):
            first.append(time.perf_counter() - start)
    proc.wait()
    watcher.join()
    if proc.returncode != 0:
        raise SystemExit(f"run with {devices} devices failed:\n{''.join(lines[-20:])}")
    rows = list(csv.DictReader((run_dir / "server_rounds.csv").open()))
    # The server's own seconds per round, ledger, records and checkpoint included.
    spread = json.loads((run_dir / "summary.json").read_text())["server_time_per_round_s"]
    return Result(devices, first[0], float(spread["median"]), peak[0], len(rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            results.append(run(n, args.per_round, args.rounds, Path(tmp)))
            r = results[-1]
            print(
                f"{r.devices:>7} devices: first round {r.first_round_s:6.1f} s | server "
                f"{r.server_s:.3f} s/round (median of {r.rounds}) | driver peak RSS "
                f"{r.peak_rss_mb:7.0f} MB",
                flush=True,
            )
    largest = max(results, key=lambda r: r.devices)
    print(
        f"at {largest.devices:,} devices: first round {largest.first_round_s:.1f} s "
        f"(target <= 60), server {largest.server_s:.3f} s/round (target <= 0.5), "
        f"peak RSS {largest.peak_rss_mb / 1024:.2f} GB (target <= 2)"
    )
    smallest = min(results, key=lambda r: r.devices)
    print(
        f"start-up growth {smallest.devices:,} -> {largest.devices:,} devices: "
        f"{largest.first_round_s / smallest.first_round_s:.2f}x"
    )


if __name__ == "__main__":
    main()
