"""Fleet scale, start to exit: 10,000 / 100,000 / 1,000,000 devices, 100 of them per round.

Each size (and strategy) is one whole run of `python -m fedbench`, what a
user waits for: start-up, the rounds, and everything after the last round
(summary, rounds_summary.csv, every figure). The phone market-share fleet is
scaled to N devices with its population on (`fleet=phones_100
+fleet.scale=N`: every phone its own speed, link, availability windows and
battery), the small CNN, plain FL rounds, every device holding a seeded
sample of the pool (`data.partition.scheme=sampled`). Measured from outside
the run:

- start to exit: launching the command to its exit (rc 0, every figure of
  fedbench.analyze.RUN_FIGURES written, or the run said why it could not be);
- first round: launching the command to the end of round 1 (its console line);
- server time per round: the server's own seconds per round outside waiting
  for replies (selection, configuring, reading replies, aggregation, ledger,
  availability and batteries, records, checkpoint: `server_time_per_round_s`
  in summary.json), median over the run's rounds;
- peak RSS of the process tree: the driver and every process under it (Ray's
  raylet, GCS and workers), summed, sampled every 0.2 s; also the tree's peak
  PSS (shared pages - torch's libraries in every worker - counted once).

The load average (1 min) is printed at the start and the end of every run:
figures measured on a busy host are not the host's.

    python benchmarks/scale.py                                  # the issue's table
    python benchmarks/scale.py sizes=10000,100000 strategies=random,oort
    python benchmarks/scale.py sizes=1000 rounds=3 out=-        # quick look, no file

Keys: sizes (devices, comma-separated), strategies (fedbench/conf/strategy names),
extra (strategies run at the extra size only; `none` for none), extra_size,
rounds, per_round, out (the results file; `-`: print only). By default the
random strategy runs at every size and oort, eafl and heteroaware at 100,000.

Targets (issue 24, 2-core host, quiet): 100,000 devices, 2 rounds: start to
exit <= 90 s, peak RSS <= 2 GB (also for oort, eafl, heteroaware);
1,000,000 devices: first round <= 60 s, start to exit <= 180 s, server time
per round <= 0.5 s, peak RSS <= 3 GB.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from fedbench.cli.grammar import Grammar, Key, parse_int, parse_ints, script

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "scale.txt"
OVERRIDES = [
    "fleet=phones_100",
    "model=small_cnn",
    "scenario=rounds",
    "scenario.pretrain.epochs=0",
    "data.partition.scheme=sampled",
    "data.partition.size=32",
    "report.progress_per_round=true",
]
GRAMMAR = Grammar(
    "python benchmarks/scale.py",
    "Fleet scale, start to exit: 10,000 / 100,000 / 1,000,000 devices, 100 of them per round.",
    (
        Key("sizes", "fleet sizes, comma-separated", "10000,100000,1000000"),
        Key("strategies", "strategies run at every size, comma-separated", "random"),
        Key(
            "extra",
            "strategies run at extra_size only (none: no extra runs)",
            "oort,eafl,heteroaware",
        ),
        Key("extra_size", "the fleet size of the extra runs", "100000"),
        Key("rounds", "rounds per run", "2"),
        Key("per_round", "devices per round", "100"),
        Key("out", "the results file (-: print only)", str(RESULTS)),
    ),
    (
        "python benchmarks/scale.py",
        "python benchmarks/scale.py sizes=1000 rounds=3 out=-",
    ),
)
# (devices, target start to exit s, target first round s or None, target server s or None,
#  target peak RSS GB)
TARGETS = {100_000: (90.0, None, None, 2.0), 1_000_000: (180.0, 60.0, 0.5, 3.0)}


@dataclass(frozen=True)
class Result:
    devices: int
    strategy: str
    start_to_exit_s: float
    first_round_s: float
    server_s: float  # median server seconds per round
    peak_rss_mb: float  # the process tree's, summed
    peak_pss_mb: float
    processes: int  # the most processes the tree had at once
    figures: int  # figure PNGs written
    load: tuple[float, float]  # 1-min load average at start and end


def load_average() -> float:
    return os.getloadavg()[0]


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids, from /proc."""
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry))
    return out


def tree(root: int) -> list[int]:
    """`root` and every process under it."""
    children = _children()
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _kb(path: str, key: str) -> int:
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_mb(pids: list[int]) -> tuple[float, float]:
    """(summed RSS, summed PSS) of the processes, MB."""
    rss = sum(_kb(f"/proc/{p}/status", "VmRSS:") for p in pids)
    pss = sum(_kb(f"/proc/{p}/smaps_rollup", "Pss:") for p in pids)
    return rss / 1024, pss / 1024


def run(devices: int, strategy: str, per_round: int, rounds: int, out: Path) -> Result:
    """One measured run; once more if Ray did not start (a busy host times its start out)."""
    try:
        return _run(devices, strategy, per_round, rounds, out / "1")
    except RayDidNotStart:
        print(f"{strategy} at {devices:,}: Ray timed out starting; measuring again", flush=True)
        return _run(devices, strategy, per_round, rounds, out / "2")


class RayDidNotStart(Exception):
    pass


def _run(devices: int, strategy: str, per_round: int, rounds: int, out: Path) -> Result:
    run_dir = out / f"{strategy}-{devices}"
    cmd = [
        sys.executable,
        "-m",
        "fedbench",
        *OVERRIDES,
        f"+fleet.scale={devices}",
        f"strategy={strategy}",
        f"strategy.clients_per_round={per_round}",
        f"scenario.rounds={rounds}",
        f"hydra.run.dir={run_dir}",
    ]
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0"}
    load_start = load_average()
    start = time.perf_counter()
    proc = subprocess.Popen(  # progress on stdout, problems on stderr: read both, in order
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    first: list[float] = []
    peak = {"rss": 0.0, "pss": 0.0, "processes": 0}
    lines: list[str] = []

    def watch_memory() -> None:
        while proc.poll() is None:
            pids = tree(proc.pid)
            rss, pss = memory_mb(pids)
            peak["rss"], peak["pss"] = max(peak["rss"], rss), max(peak["pss"], pss)
            peak["processes"] = max(peak["processes"], len(pids))
            time.sleep(0.2)

    watcher = threading.Thread(target=watch_memory, daemon=True)
    watcher.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if not first and line.startswith("[fedbench] round 1"):
            first.append(time.perf_counter() - start)
    proc.wait()
    exit_s = time.perf_counter() - start
    watcher.join()
    if proc.returncode != 0 and any("timed out during startup" in x for x in lines):
        raise RayDidNotStart
    if proc.returncode != 0 or not first:
        raise SystemExit(
            f"{strategy} at {devices} devices failed (rc {proc.returncode}):\n"
            + "".join(lines[-20:])
        )
    figures = len(list((run_dir / "figures").glob("*.png")))
    rows = list(csv.DictReader((run_dir / "server_rounds.csv").open()))
    # The server's own seconds per round, ledger, records and checkpoint included.
    spread = json.loads((run_dir / "summary.json").read_text())["server_time_per_round_s"]
    assert len(rows) == rounds, f"{len(rows)} rounds ran, {rounds} asked"
    return Result(
        devices,
        strategy,
        exit_s,
        first[0],
        float(spread["median"]),
        peak["rss"],
        peak["pss"],
        int(peak["processes"]),
        figures,
        (load_start, load_average()),
    )


def line(r: Result) -> str:
    return (
        f"{r.strategy:<12} {r.devices:>9,} devices: start to exit {r.start_to_exit_s:6.1f} s | "
        f"first round {r.first_round_s:5.1f} s | server {r.server_s:.3f} s/round | peak RSS "
        f"{r.peak_rss_mb / 1024:4.2f} GB (PSS {r.peak_pss_mb / 1024:4.2f} GB, {r.processes} "
        f"processes) | {r.figures} figures | load {r.load[0]:.2f} -> {r.load[1]:.2f}"
    )


def verdicts(results: list[Result]) -> list[str]:
    """Each measured target: the figure, the target, and whether it is met."""
    out = []
    for r in results:
        target = TARGETS.get(r.devices)
        if target is None:
            continue
        exit_s, first_s, server_s, rss_gb = target
        checks = [("start to exit", r.start_to_exit_s, exit_s, "s")]
        if first_s is not None:
            checks.append(("first round", r.first_round_s, first_s, "s"))
        if server_s is not None:
            checks.append(("server time per round", r.server_s, server_s, "s"))
        checks.append(("peak RSS", r.peak_rss_mb / 1024, rss_gb, "GB"))
        parts = [
            f"{what} {value:.2f} {unit} (<= {limit:g}: {'ok' if value <= limit else 'OVER'})"
            for what, value, limit, unit in checks
        ]
        out.append(f"{r.strategy} at {r.devices:,}: " + ", ".join(parts))
    return out


def main(argv: list[str]) -> int:
    return script(GRAMMAR, lambda args: measure(args, argv), argv)


def measure(args: dict[str, str], argv: list[str]) -> None:
    sizes = parse_ints("sizes", args["sizes"], 1)
    plan = [(n, s) for n in sizes for s in args["strategies"].split(",") if s]
    if args["extra"] not in ("", "none"):
        extra = parse_int("extra_size", args["extra_size"], 1)
        plan += [(extra, s) for s in args["extra"].split(",") if (extra, s) not in plan]
    rounds, per_round = (
        parse_int("rounds", args["rounds"], 1),
        parse_int("per_round", args["per_round"], 1),
    )
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    command = "python benchmarks/scale.py" + "".join(f" {a}" for a in argv)
    head = [
        f"# {command}  ({stamp}, {os.cpu_count()} cores, {platform.machine()}, "
        f"load average {load_average():.2f} at the start)",
        f"# {per_round} devices a round, {rounds} rounds, fleet=phones_100 with its population; "
        "peak RSS/PSS: the whole process tree (driver + Ray), sampled every 0.2 s",
    ]
    print("\n".join(head), flush=True)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for devices, strategy in plan:
            results.append(run(devices, strategy, per_round, rounds, Path(tmp)))
            print(line(results[-1]), flush=True)
    tail = [*verdicts(results), f"# load average {load_average():.2f} at the end"]
    print("\n".join(tail))
    if args["out"] != "-":
        Path(args["out"]).write_text("\n".join([*head, *map(line, results), *tail]) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
