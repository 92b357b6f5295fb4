"""Each device's availability as periodic windows, and its battery over the virtual clock.

A device's pattern repeats every `period_s` of its own (a drawn population:
one day; a trace: the trace's length, as FedScale replays its traces). A
window is a [start, end) phase within the period, with a flag saying
whether the device charges during it; windows that wrap past the period's
end are stored as two. Everything is flat numpy arrays, one row per window,
so a 100,000-device fleet is answered in a few vectorised passes.

Battery: a device gains `charge_w` while in a charging window and loses
`idle_w` otherwise (the owner's own use and standby), clipped to [0, 100] %.
`advance` integrates that exactly, edge to edge, so a battery that fills at
3 am and drains all day ends the day where it should, not where the
net balance of the interval would put it. Training and communication drain
it by their energy separately (the device's meter; fedbench.population.meter).

Between two edges of its windows nothing about a device changes, so a
`Cursor` keeps each device's state (in a window, charging) and its next
edge: moving a 1,000,000-device fleet 30 virtual seconds forward touches the
few thousand devices that crossed an edge, not every window row. What a
cursor answers is exactly what a fresh look would (edges are absolute
times, a state holds from just after the time it was taken), so a resumed
run, whose cursor starts empty, continues bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DAY_S = 86_400.0
_EPS_S = 1e-6  # an edge closer than this to the target time is the target
_BLOCK = 1 << 17  # devices a cursor re-reads at a time


@dataclass(frozen=True, eq=False)
class Windows:
    """Flat window rows plus each device's period; `described[i]` False: no windows known."""

    n: int
    device: np.ndarray  # int64 per window
    start_s: np.ndarray  # phase in [0, period)
    end_s: np.ndarray  # start < end <= period
    charging: np.ndarray  # bool per window
    period_s: np.ndarray  # float per device
    described: np.ndarray  # bool per device

    def __post_init__(self) -> None:
        # Rows are sorted by device: device i's rows are _row_start[i]:_row_start[i + 1].
        counts = np.bincount(self.device, minlength=self.n)
        row_start = np.concatenate([[0], np.cumsum(counts)])
        owners = np.flatnonzero(counts)  # the devices with rows, and where theirs start
        object.__setattr__(self, "_row_start", row_start)
        object.__setattr__(self, "_owners", owners)
        object.__setattr__(self, "_first", row_start[owners])

    @classmethod
    def build(
        cls,
        n: int,
        device: np.ndarray,
        start_s: np.ndarray,
        length_s: np.ndarray,
        charging: np.ndarray,
        period_s: np.ndarray,
        described: np.ndarray,
    ) -> Windows:
        """Windows from (device, start phase, length): wrapping ones split in two.

        Temporaries are let go as soon as they are used: a 1,000,000-phone
        population has ~4,000,000 windows, 32 MB per column.
        """
        device = np.asarray(device, dtype=np.int64)
        length = np.asarray(length_s, dtype=float)
        start = np.asarray(start_s, dtype=float)
        charges = np.asarray(charging, dtype=bool)
        keep = length > 0
        if not keep.all():
            device, length, start, charges = device[keep], length[keep], start[keep], charges[keep]
        del keep
        period = np.asarray(period_s, dtype=float)[device]
        length = np.minimum(length, period)
        start = np.mod(start, period)
        end = start + length
        del length
        wraps = np.flatnonzero(end > period)  # the part past the period starts the next one
        tail = end[wraps] - period[wraps]
        np.minimum(end, period, out=end)
        del period
        devs = np.concatenate([device, device[wraps]])
        del device
        order = np.argsort(devs, kind="stable")
        devs = devs[order]
        starts = np.concatenate([start, np.zeros(len(wraps))])[order]
        del start
        ends = np.concatenate([end, tail])[order]
        del end, tail
        charges = np.concatenate([charges, charges[wraps]])[order]
        return cls(
            n,
            devs,
            starts,
            ends,
            charges,
            np.asarray(period_s, dtype=float),
            np.asarray(described, dtype=bool),
        )

    def _phase(self, t_s: float | np.ndarray) -> np.ndarray:
        """Each window's phase at time t (a scalar, or one time per device)."""
        t = np.broadcast_to(np.asarray(t_s, dtype=float), (self.n,))[self.device]
        return np.mod(t, self.period_s[self.device])

    def _any(self, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        out[self.device[rows]] = True
        return out

    def inside(self, t_s: float | np.ndarray) -> np.ndarray:
        """Per device: inside any of its windows at t (undescribed devices: False)."""
        phase = self._phase(t_s)
        return self._any((self.start_s <= phase) & (phase < self.end_s))

    def device_inside(self, i: int, t_s: float) -> bool:
        """`inside(t)[i]` for one device, without touching the others' rows."""
        lo, hi = np.searchsorted(self.device, [i, i + 1])
        phase = t_s % self.period_s[i]
        return bool(np.any((self.start_s[lo:hi] <= phase) & (phase < self.end_s[lo:hi])))

    def charging_at(self, t_s: float | np.ndarray) -> np.ndarray:
        phase = self._phase(t_s)
        return self._any((self.start_s <= phase) & (phase < self.end_s) & self.charging)

    def next_edge(self, t_s: np.ndarray) -> np.ndarray:
        """Per device: the first window edge strictly after its time t (inf: no windows)."""
        phase = self._phase(t_s)
        period = self.period_s[self.device]
        ahead = []
        for edge in (self.start_s, self.end_s):
            gap = np.mod(edge - phase, period)
            ahead.append(np.where(gap <= _EPS_S, period, gap))
        gap = np.minimum(ahead[0], ahead[1])
        out = np.full(self.n, np.inf)
        if len(gap):  # rows are sorted by device: one reduceat over each device's rows
            out[self._owners] = np.minimum.reduceat(gap, self._first)  # type: ignore[attr-defined]
        return np.broadcast_to(np.asarray(t_s, dtype=float), (self.n,)) + out

    def state_of(self, devices: np.ndarray, t_s: np.ndarray) -> tuple[np.ndarray, ...]:
        """(inside, charging, next edge) of `devices` from just after their times `t_s`.

        The state holds on (t, edge): edges closer than _EPS_S after t count
        as passed (a step that lands on an edge is past it). The edge is an
        absolute time, the same float whichever t before it it is found from.
        Only these devices' rows are read.
        """
        devices = np.asarray(devices, dtype=np.int64)
        start = self._row_start[devices]  # type: ignore[attr-defined]
        count = self._row_start[devices + 1] - start  # type: ignore[attr-defined]
        owner = np.repeat(np.arange(len(devices)), count)
        rows = start[owner] + np.arange(len(owner)) - np.repeat(np.cumsum(count) - count, count)
        t = np.asarray(t_s, dtype=float)[owner]
        period = self.period_s[devices][owner]
        cycle = np.floor(t / period)
        after = t - cycle * period + _EPS_S  # the phase just after t
        over = after >= period  # just after t is the next cycle already
        cycle, after = cycle + over, np.where(over, after - period, after)
        begin, end = self.start_s[rows], self.end_s[rows]
        inside_row = (begin <= after) & (after < end)
        inside = np.zeros(len(devices), dtype=bool)
        charging = np.zeros(len(devices), dtype=bool)
        inside[owner[inside_row]] = True
        charging[owner[inside_row & self.charging[rows]]] = True
        edge = np.full(len(devices), np.inf)
        if len(rows):
            # The next start or end after `after`, in this cycle or the next: (cycle + k) * period
            # + phase, with the whole number of periods first so every t finds the same float.
            ahead = []
            for phase in (begin, end):
                wrap = (phase <= after).astype(float)
                ahead.append((cycle + wrap) * period + phase)
            nearest = np.minimum(ahead[0], ahead[1])
            has = count > 0
            edge[has] = np.minimum.reduceat(nearest, (np.cumsum(count) - count)[has])
        return inside, charging, edge

    def hours_per_day(self, charging: bool | None = None) -> np.ndarray:
        """Per device: hours a day inside its windows (all, or only charging / on battery)."""
        rows = np.ones(len(self.device), dtype=bool)
        if charging is not None:
            rows = self.charging == charging
        seconds = np.bincount(
            self.device[rows], weights=(self.end_s - self.start_s)[rows], minlength=self.n
        )
        return seconds / self.period_s * 24.0


class Cursor:
    """Each device's window state and next edge as of the last time it was asked for.

    `at(devices, t)` brings those devices to their times t, reading the rows
    of only the devices whose state is out of date (t before it was taken,
    or at or past its edge); `inside`, `charging` and `edge` are then theirs
    at t. Times only move forward in a run, so a round refreshes the devices
    that crossed an edge since the last one.
    """

    def __init__(self, windows: Windows) -> None:
        n = windows.n
        self.windows = windows
        self.since = np.full(n, np.nan)  # when each device's state was taken (NaN: never)
        self.edge = np.full(n, -np.inf)
        self.inside = np.zeros(n, dtype=bool)
        self.charging = np.zeros(n, dtype=bool)

    def at(self, devices: np.ndarray, t_s: np.ndarray) -> None:
        """Bring `devices` to their times `t_s`."""
        t = np.asarray(t_s, dtype=float)
        fresh = (self.since[devices] <= t) & (t < self.edge[devices] - _EPS_S)
        self._read(devices[~fresh], t[~fresh])

    def at_all(self, t_s: np.ndarray, where: np.ndarray) -> None:
        """Bring every device `where` is true for to its time in `t_s` (one per device):
        whole-array operations, no gather of the fleet."""
        fresh = (self.since <= t_s) & (t_s < self.edge - _EPS_S)
        stale = np.flatnonzero(where & ~fresh)
        self._read(stale, t_s[stale])

    def _read(self, stale: np.ndarray, when: np.ndarray) -> None:
        # In blocks: the first look at a 1,000,000-device fleet reads every window row,
        # and its temporaries stay those of a block.
        for lo in range(0, len(stale), _BLOCK):
            some, at = stale[lo : lo + _BLOCK], when[lo : lo + _BLOCK]
            inside, charging, edge = self.windows.state_of(some, at)
            self.since[some], self.edge[some] = at, edge
            self.inside[some], self.charging[some] = inside, charging


def advance(
    level_pct: np.ndarray,
    t0_s: np.ndarray,
    t1_s: float,
    windows: Windows,
    idle_w: np.ndarray,
    charge_w: np.ndarray,
    capacity_wh: np.ndarray,
    cursor: Cursor | None = None,
) -> np.ndarray:
    """Battery levels at t1 from levels at t0 (per device), charging and idling between.

    Devices whose level or time is NaN (no battery, never started) are left as they are.
    `cursor` (kept by the caller from one call to the next) spares re-reading the
    windows of devices that crossed no edge since; the levels are the same without.
    """
    cursor = cursor if cursor is not None else Cursor(windows)
    level = np.array(level_pct, dtype=float)
    t = np.array(t0_s, dtype=float)
    live = ~np.isnan(level) & ~np.isnan(t) & (t < t1_s) & (capacity_wh > 0)
    pct_per_s = 100.0 / (np.where(capacity_wh > 0, capacity_wh, np.nan) * 3600.0)
    # Every device to its next edge (or t1) in whole-array operations: between two
    # rounds most devices cross no edge, and are done after this pass.
    cursor.at_all(t, live)
    edge = np.minimum(cursor.edge, t1_s)
    rate = np.where(cursor.charging, charge_w, -idle_w) * pct_per_s
    step = np.where(live, edge - t, 0.0)
    level = np.where(live, np.clip(level + rate * step, 0.0, 100.0), level)
    t = np.where(live, edge, t)
    rest = np.flatnonzero(live & (t < t1_s - _EPS_S))
    while len(rest):  # the few that crossed an edge: on to the next, until t1
        cursor.at(rest, t[rest])
        edge_r = np.minimum(cursor.edge[rest], t1_s)
        rate_r = np.where(cursor.charging[rest], charge_w[rest], -idle_w[rest]) * pct_per_s[rest]
        level[rest] = np.clip(level[rest] + rate_r * (edge_r - t[rest]), 0.0, 100.0)
        t[rest] = edge_r
        rest = rest[edge_r < t1_s - _EPS_S]
    return level


def charging_seconds(windows: Windows, t0_s: float, t1_s: float) -> np.ndarray:
    """Per device: seconds in [t0, t1) spent in charging windows (describes traces, tests)."""

    def cumulative(t: float) -> np.ndarray:
        period = windows.period_s[windows.device]
        cycles = np.floor(t / period)
        phase = t - cycles * period
        rows = cycles * (windows.end_s - windows.start_s) + np.clip(
            phase - windows.start_s, 0.0, windows.end_s - windows.start_s
        )
        return np.bincount(
            windows.device, weights=np.where(windows.charging, rows, 0.0), minlength=windows.n
        )

    return cumulative(t1_s) - cumulative(t0_s)
