"""The ledger: the server's per-device history of RoundReports.

Strategies read it and nothing else keeps a second copy. One numpy array per
field, indexed by device, so selection over 1,000,000 devices stays vectorised;
updating it costs O(reports in the round), and so does its checkpoint (only
availability and batteries move for the whole fleet every round).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from fedbench.core.device import DeviceSpec, DeviceState
from fedbench.core.records import STATUSES, RoundReport

STATUS_CODE: dict[str, int] = {s: i for i, s in enumerate(STATUSES)}
NEVER = -1  # round value for "never seen"
# Columns the server moves for the whole fleet every round (availability, batteries
# on the clock): a checkpoint saves them whole. Every other column changes only where
# a report or a device's state lands, and is saved at those devices alone.
DENSE: tuple[str, ...] = ("available", "battery_pct", "battery_time_s")


@dataclass
class Ledger:
    """Per-device arrays; `last_*` fields hold the most recent report's value (NaN = none)."""

    devices: Sequence[DeviceSpec]
    available: np.ndarray = field(init=False)  # bool: can be picked now
    participation: np.ndarray = field(init=False)  # int: rounds trained (status ok)
    selected: np.ndarray = field(init=False)  # int: rounds picked (any status)
    last_round: np.ndarray = field(init=False)  # int: last round picked, NEVER if none
    last_status: np.ndarray = field(init=False)  # int: STATUS_CODE of the last report
    failures: np.ndarray = field(init=False)  # int: reports with a status other than ok
    latency_s: np.ndarray = field(init=False)
    round_trip_s: np.ndarray = field(init=False)
    energy_j: np.ndarray = field(init=False)
    avg_power_w: np.ndarray = field(init=False)
    peak_mem_mb: np.ndarray = field(init=False)
    mem_budget_mb: np.ndarray = field(init=False)
    temp_c: np.ndarray = field(init=False)
    battery_pct: np.ndarray = field(init=False)
    state_time_s: np.ndarray = field(init=False)  # virtual time temp refers to
    # Virtual time battery_pct refers to; NaN: the server does not keep the device's
    # battery on the clock (no fleet.population), the device reports it after each round.
    battery_time_s: np.ndarray = field(init=False)
    train_loss: np.ndarray = field(init=False)
    num_examples: np.ndarray = field(init=False)
    utility: np.ndarray = field(init=False)  # statistical utility (Oort: |B| sqrt(mean loss^2))
    total_energy_j: np.ndarray = field(init=False)
    # Predictions from each device's profile for this experiment's workload,
    # filled by the server before round 1 (NaN where no profile: host devices).
    pred_latency_s: np.ndarray = field(init=False)  # compute time of one round's training
    pred_energy_j: np.ndarray = field(init=False)
    pred_peak_mem_mb: np.ndarray = field(init=False)  # of the cheapest plan that fits, if any
    pred_comm_s: np.ndarray = field(init=False)
    throttle_temp_c: np.ndarray = field(init=False)  # first thermal trip point
    plan: list[str] = field(init=False)
    touched: np.ndarray = field(init=False)  # bool: a report or a state landed here

    def __post_init__(self) -> None:
        n = len(self.devices)
        nan = lambda: np.full(n, np.nan)  # noqa: E731 - a tiny local factory
        self.available = np.ones(n, dtype=bool)
        self.participation = np.zeros(n, dtype=np.int64)
        self.selected = np.zeros(n, dtype=np.int64)
        self.last_round = np.full(n, NEVER, dtype=np.int64)
        self.last_status = np.full(n, NEVER, dtype=np.int64)
        self.failures = np.zeros(n, dtype=np.int64)
        for name in (
            "latency_s",
            "round_trip_s",
            "energy_j",
            "avg_power_w",
            "peak_mem_mb",
            "mem_budget_mb",
            "temp_c",
            "battery_pct",
            "state_time_s",
            "battery_time_s",
            "train_loss",
            "num_examples",
            "utility",
            "pred_latency_s",
            "pred_energy_j",
            "pred_peak_mem_mb",
            "pred_comm_s",
            "throttle_temp_c",
        ):
            setattr(self, name, nan())
        self.total_energy_j = np.zeros(n)
        self.plan = [""] * n
        self.touched = np.zeros(n, dtype=bool)

    def __len__(self) -> int:
        return len(self.devices)

    def record(self, reports: Iterable[RoundReport], index_of: Mapping[str, int]) -> None:
        """Fold one round's reports in; `index_of` maps device name -> index."""
        for r in reports:
            i = index_of[r.device]
            self.touched[i] = True
            self.selected[i] += 1
            self.last_round[i] = r.round
            self.last_status[i] = STATUS_CODE[r.status]
            if not math.isnan(r.energy_j):
                self.total_energy_j[i] += r.energy_j
            for name in (
                "latency_s",
                "round_trip_s",
                "energy_j",
                "avg_power_w",
                "peak_mem_mb",
                "mem_budget_mb",
                "battery_pct",
            ):
                value = getattr(r, name)
                if not math.isnan(value):
                    getattr(self, name)[i] = value
            if not math.isnan(r.temp_c_end):
                self.temp_c[i] = r.temp_c_end
            if r.plan:
                self.plan[i] = r.plan
            if r.status == "ok":
                self.participation[i] += 1
                self.train_loss[i] = r.train_loss
                self.num_examples[i] = r.num_examples
                # Oort's statistical utility: |B_i| * sqrt(mean squared loss); with the
                # mean loss as the only figure a client sends, sqrt(loss^2) = loss.
                self.utility[i] = r.num_examples * abs(r.train_loss)
            else:
                self.failures[i] += 1

    def set_state(self, i: int, state: DeviceState) -> None:
        self.touched[i] = True
        self.temp_c[i] = state.temp_c
        self.battery_pct[i] = state.battery_pct
        self.state_time_s[i] = state.time_s
        if not math.isnan(self.battery_time_s[i]):
            # The reported level is the one at the end of training: idle drain runs
            # from there (from the round's start it would drain twice while training).
            self.battery_time_s[i] = state.time_s

    def state(self, i: int) -> DeviceState | None:
        """The emulated state to start device i's next round from (None: never run)."""
        if math.isnan(self.state_time_s[i]):
            return None
        return DeviceState(
            float(self.temp_c[i]), float(self.battery_pct[i]), float(self.state_time_s[i])
        )

    def columns(self) -> list[str]:
        """The names of the per-device arrays (what selection reads), `touched` aside."""
        return [
            name
            for name, value in vars(self).items()
            if isinstance(value, np.ndarray) and name != "touched"
        ]

    def state_dict(self) -> dict[str, object]:
        """What a checkpoint must restore, O(devices touched) apart from the DENSE columns.

        The other columns differ from their values at the start of the run
        (defaults, then the server's predictions) only where a report or a
        state landed: they are saved at those devices (`touched`), and
        `load_state_dict` writes them back over a ledger set up the same way.
        """
        touched = np.flatnonzero(self.touched)
        state: dict[str, object] = {"touched": touched}
        for name in self.columns():
            column = getattr(self, name)
            state[name] = column.copy() if name in DENSE else column[touched]
        # One string, not one per device: a checkpoint stays one write.
        state["plan"] = "\n".join(self.plan[i] for i in touched)
        return state

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore a `state_dict` onto a ledger set up as the saved one was at its start.

        A checkpoint without `touched` (written before) holds every column whole.
        """
        n = len(self.devices)
        whole = "touched" not in state
        touched = np.arange(n) if whole else np.asarray(state["touched"], dtype=np.int64)
        if len(touched) and not (touched.min() >= 0 and touched.max() < n):
            raise ValueError(f"ledger 'touched' names devices outside the fleet of {n}")
        for name, value in state.items():
            if name == "touched":
                continue
            if name == "plan":
                plans = value.split("\n") if isinstance(value, str) else list(value)  # type: ignore[call-overload]
                if len(plans) != len(touched) and not (len(plans) == 1 and not len(touched)):
                    raise ValueError(
                        f"ledger 'plan' has {len(plans)} entries, expected {len(touched)}"
                    )
                for i, plan in zip(touched.tolist(), plans, strict=False):
                    self.plan[i] = plan
                continue
            current = getattr(self, name)
            restored = np.asarray(value)
            dense = whole or name in DENSE
            expected = current.shape if dense else (len(touched),)
            if restored.shape != expected:
                raise ValueError(f"ledger '{name}' has {restored.shape}, expected {expected}")
            if dense:
                setattr(self, name, restored.astype(current.dtype, copy=True))
            else:
                current[touched] = restored
        self.touched[touched] = True

    def names(self, indices: Sequence[int] | np.ndarray) -> list[str]:
        return [self.devices[int(i)].name for i in indices]
