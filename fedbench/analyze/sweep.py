"""A multirun sweep, shown: each job's number and overrides as it starts, the analysis at the end.

Configured in fedbench/conf/config.yaml (`hydra.callbacks.sweep`). Hydra calls it
around every sweep (`python -m fedbench -m ...`): the sweep folder gets a
console.log of the whole sweep, every job is announced with the overrides
it runs (`job 3/12: strategy=oort seed=1`), and when the last job is done
`fedbench.analyze` compares the runs into `<sweep>/analysis/` and prints
the comparison table.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from fedbench.report.progress import Task, console, elapsed

ANALYSIS_DIR = "analysis"


def job_count(overrides: Sequence[str], params: dict[str, str] | None = None) -> int | None:
    """How many jobs Hydra's basic sweeper makes of these overrides (None: cannot tell)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    items = [f"{k}={v}" for k, v in (params or {}).items()] + list(overrides)
    try:
        parsed = OverridesParser.create().parse_overrides(items)
    except Exception:  # an override Hydra itself will report
        return None
    count = 1
    for override in parsed:
        if override.is_sweep_override():
            if not override.is_discrete_sweep():
                return None  # an interval: a search, not a grid
            count *= len(list(override.sweep_string_iterator()))
    return count


class SweepProgress(Callback):
    def __init__(self, analyze: bool = True) -> None:
        self.analyze = analyze
        self.total: int | None = None
        self.task: Task | None = None
        self.sweep_dir: Path | None = None
        self.started: dict[int, float] = {}

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        self.sweep_dir = Path(str(config.hydra.sweep.dir))
        node = config.hydra.sweeper.get("params")  # `hydra.sweeper.params` sweeps, if any
        params = OmegaConf.to_container(node, resolve=False) if node is not None else {}
        swept = {str(k): str(v) for k, v in params.items()} if isinstance(params, dict) else {}
        self.total = job_count(list(config.hydra.overrides.task), swept)
        console.attach(self.sweep_dir)
        jobs = f"{self.total} runs" if self.total is not None else "runs"
        self.task = console.start_task(f"sweep of {jobs} -> {self.sweep_dir}", self.total, "runs")

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        if self.task is None:
            return  # a single run, or a job in another process (a parallel launcher)
        num = int(config.hydra.job.num)
        self.started[num] = time.perf_counter()
        overrides = " ".join(str(o) for o in config.hydra.overrides.task) or "(no overrides)"
        of = f"/{self.total}" if self.total is not None else ""
        self.task.update(f"job {num + 1}{of}: {overrides}")
        console.line(f"job {num + 1}{of}: {overrides} -> {config.hydra.runtime.output_dir}")

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if self.task is None:
            return
        num = int(config.hydra.job.num)
        took = time.perf_counter() - self.started.pop(num, math.nan)
        status = "completed" if job_return.status == JobStatus.COMPLETED else "failed"
        of = f"/{self.total}" if self.total is not None else ""
        console.line(f"job {num + 1}{of} {status} in {elapsed(took)}")
        self.task.update(f"job {num + 1}{of} {status}")
        self.task.advance()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if self.task is not None:
            console.finish_task(self.task)
            self.task = None
        try:
            if self.analyze and self.sweep_dir is not None:
                self._compare(self.sweep_dir)
        finally:
            if self.sweep_dir is not None:
                console.detach(self.sweep_dir)

    def _compare(self, sweep_dir: Path) -> None:
        from fedbench.analyze import compare, find_run_dirs
        from fedbench.errors import FedbenchError

        runs = find_run_dirs([sweep_dir])
        if not runs:
            console.line(f"no run folder under {sweep_dir}: nothing to compare")
            return
        out = sweep_dir / ANALYSIS_DIR
        try:
            table = compare(runs, out)
        except FedbenchError as exc:
            console.problem(f"analysis of {sweep_dir} failed: {exc}")
            return
        print(table, flush=True)
        console.line(f"comparison of {len(runs)} runs -> {out}")
