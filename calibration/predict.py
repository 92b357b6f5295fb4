"""The emulator's step time for many calibration rows at once, for fitting.

`Predictor` concatenates the call tables of every row of one framework and
times them with the emulator's own per-call model
(`fedbench.devices.kernels`), the emulator's own thread placement and
governor (`fedbench.devices.cpu.place`), serial terms and swapping
(`fedbench.devices.step`, `fedbench.devices.memory`) and a governor's
load-driven clocks (`fedbench.devices.cpu.load_clocks`): one vectorised call
per framework instead of one emulation per row, so a fit with cross-
validation takes minutes. fit.py checks at the end that every row's
prediction equals `fedbench.devices.emulator.emulate`'s (one step from
the idle state), so the report is exactly what the emulator says.

Forward-only predictions (the MNN rows' inference timing) are the forward
calls alone: their roofline, im2col traffic and dispatch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from rows import Row

from fedbench.devices.constants import Constants
from fedbench.devices.cpu import Active, load_clocks, main_thread, place
from fedbench.devices.kernels import (
    FORWARD,
    CallTable,
    CpuRig,
    cpu_call_seconds,
    gpu_call_seconds,
)
from fedbench.devices.lowering import lower
from fedbench.devices.memory import fault_seconds, resident_mb, swap_seconds
from fedbench.devices.profile import DeviceProfile, load_profile
from fedbench.devices.step import cpu_rig, gpu_rig, serial_seconds
from fedbench.measure.workload import Workload


@dataclass(frozen=True)
class Predictions:
    step_s: np.ndarray  # one training step, per row
    forward_s: np.ndarray  # forward pass alone, per row (NaN where not published)
    rss_mb: np.ndarray  # peak resident set, per row
    gpu_util: np.ndarray  # share of the step the GPU runs kernels (NaN on CPU rows)


@dataclass
class _Group:
    """The rows of one (processor, framework), their calls concatenated."""

    rows: list[int]
    table: CallTable
    row_of_call: np.ndarray  # index into `rows`
    forward: CallTable
    row_of_forward: np.ndarray


class Predictor:
    def __init__(self, rows: Sequence[Row], loads: Sequence[Workload]) -> None:
        self.rows, self.loads = list(rows), list(loads)
        self.profiles: dict[str, DeviceProfile] = {r.device: load_profile(r.device) for r in rows}
        self.groups: dict[tuple[str, str], _Group] = {}
        # Each step as the framework's build runs it (fedbench.devices.lowering); a
        # forward row is inference, which that graph runs without its training ops.
        measured = [CallTable.of(w) for w in loads]
        backends = [self.profiles[r.device].framework.conv_backend for r in rows]

        def lowered(i: int, table: CallTable) -> CallTable:
            return lower(table, rows[i].framework, loads[i].micro_batch, backends[i])

        tables = [lowered(i, t) for i, t in enumerate(measured)]
        keys = sorted({(r.knobs.device, r.framework) for r in rows})
        for key in keys:
            idx = [i for i, r in enumerate(rows) if (r.knobs.device, r.framework) == key]
            fwd = [i for i in idx if rows[i].forward_s is not None]
            parts = [tables[i] for i in idx]
            whole = CallTable.concat(parts)
            fparts = [lowered(i, measured[i].select(measured[i].phase == FORWARD)) for i in fwd]
            self.groups[key] = _Group(
                idx,
                whole,
                np.repeat(np.arange(len(idx)), [len(t) for t in parts]),
                CallTable.concat(fparts) if fparts else whole.select(np.zeros(len(whole), bool)),
                np.repeat([idx.index(i) for i in fwd], [len(t) for t in fparts]).astype(int),
            )

    def __call__(self, consts: Constants) -> Predictions:
        n = len(self.rows)
        step, forward, rss = np.zeros(n), np.full(n, np.nan), np.zeros(n)
        util = np.full(n, np.nan)
        for (processor, framework), g in self.groups.items():
            if processor == "gpu":
                self._gpu(consts, framework, g, step, rss, util)
            else:
                self._cpu(consts, framework, g, step, forward, rss)
        return Predictions(step, forward, rss, util)

    def _placed(self, consts: Constants, g: _Group) -> list[tuple[Active, ...]]:
        out = []
        for i in g.rows:
            r = self.rows[i]
            out.append(place(self.profiles[r.device], r.knobs, consts, None))
        return out

    def _cpu(
        self,
        consts: Constants,
        framework: str,
        g: _Group,
        step: np.ndarray,
        forward: np.ndarray,
        rss: np.ndarray,
    ) -> None:
        fw, shared = consts.framework(framework), consts.fitted.shared
        placed = self._placed(consts, g)
        profiles = [self.profiles[self.rows[i].device] for i in g.rows]
        rigs = [cpu_rig(p, a, consts) for p, a in zip(profiles, placed, strict=True)]

        def spread(which: np.ndarray) -> CpuRig:
            field = lambda name: np.array([float(getattr(r, name)) for r in rigs])[which]  # noqa: E731
            return CpuRig(*(field(f) for f in CpuRig.__dataclass_fields__))

        # The forward rows are inference sessions of their own: their calls at the placed clocks.
        if len(g.forward):
            fcalls = cpu_call_seconds(g.forward, spread(g.row_of_forward), fw, shared)
            fsums = np.bincount(g.row_of_forward, weights=fcalls.total, minlength=len(g.rows))
        # Serial terms outside the calls: the main core's clock alone sets them, and
        # load_clocks never moves the main thread's cluster. `host` and the calls'
        # dispatch are the work the worker threads sleep through (step._HOST).
        host, memory = np.zeros(len(g.rows)), np.zeros(len(g.rows))
        for k, i in enumerate(g.rows):
            w = self.loads[i]
            overhead, loading = serial_seconds(
                fw, w, float(rigs[k].main_ghz), float(rigs[k].dispatch_scale)
            )
            rss[i] = resident_mb(w, fw)
            fault = fault_seconds(rss[i], fw, float(rigs[k].main_ghz))
            host[k] = overhead + loading
            memory[k] = swap_seconds(profiles[k], rss[i], shared) + fault

        def sums(which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """Per row, the calls' seconds and their dispatch's."""
            rig = spread(g.row_of_call[which])
            calls = cpu_call_seconds(g.table.select(which), rig, fw, shared)
            rows, n = g.row_of_call[which], len(g.rows)
            return (
                np.bincount(rows, weights=calls.total, minlength=n),
                np.bincount(rows, weights=calls.dispatch, minlength=n),
            )

        total, dispatch = sums(np.ones(len(g.table), bool))
        # A governed worker cluster idles down to its load (fedbench.devices.cpu.load_clocks).
        changed = []
        for k, active in enumerate(placed):
            idle = dispatch[k] + host[k]
            busy = total[k] + host[k] + memory[k] - idle
            settled = load_clocks(active, main_thread(active, consts), busy, idle)
            if settled != active:
                rigs[k] = cpu_rig(profiles[k], settled, consts)
                changed.append(k)
        if changed:
            again = sums(np.isin(g.row_of_call, changed))
            total[changed] = again[0][changed]
        for k, i in enumerate(g.rows):
            step[i] = total[k] + host[k] + memory[k]
            if self.rows[i].forward_s is not None:
                forward[i] = fsums[k]

    def _gpu(
        self,
        consts: Constants,
        framework: str,
        g: _Group,
        step: np.ndarray,
        rss: np.ndarray,
        util: np.ndarray,
    ) -> None:
        fw, shared = consts.gpu_framework(framework), consts.fitted.shared
        for k, i in enumerate(g.rows):
            r, w = self.rows[i], self.loads[i]
            profile = self.profiles[r.device]
            gpu = profile.gpu
            assert gpu is not None
            rig = gpu_rig(profile, place(profile, r.knobs, consts, None), consts)
            table = g.table.select(g.row_of_call == k)
            calls = gpu_call_seconds(table, rig, fw)
            loading = w.input_bytes / 1e9 / gpu.copy_gbs
            rss[i] = resident_mb(w, fw)
            step[i] = float(calls.total.sum()) + loading + swap_seconds(profile, rss[i], shared)
            util[i] = float(calls.device.sum()) / step[i]
