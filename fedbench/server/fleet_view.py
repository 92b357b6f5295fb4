"""What the server knows of each device before and between its rounds.

Before a device ever trains, its meter predicts its round (`Meter.predict`):
latency, energy, peak memory and communication time for this experiment's
workload, so strategies can rank devices never seen. Predictions are for the
memory plan the device would pick (fedbench.train.round_plan; budget at
virtual time 0). From each emulated device's profile: the first thermal trip
point, and availability from its daily pattern at the virtual clock. A meter
that only measures (host, physical) predicts nothing: those devices'
predictions stay NaN and they are always available.

With `fleet.population` every device is its own draw (fedbench.population):
a profile's prediction is spread over its devices by their speed and their
own links (fedbench.devices.variation, vectorised: exact while a device's
slowed round stays under its profile's first thermal trip, where its own
meter would throttle it; see that module), availability is their
own windows, and the view keeps every battery on the virtual clock (idle
drain, charging) and takes devices below the floor out of the pick.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch import nn

from fedbench.core.device import DeviceSpec, Traits
from fedbench.core.meter import TrainJob
from fedbench.devices.meters import make_meter, profile_of
from fedbench.devices.network import is_available
from fedbench.devices.profile import DeviceProfile
from fedbench.devices.variation import link_s
from fedbench.experiment.build import workload_optimizer
from fedbench.experiment.fleet import DeviceNames, by_profile, profile_column
from fedbench.experiment.schema import Experiment
from fedbench.ledger import Ledger
from fedbench.population.draw import Population, draw
from fedbench.population.windows import Cursor, advance
from fedbench.scenarios.base import Scenario
from fedbench.scenarios.context import DataContext
from fedbench.train.loop import step_sizes
from fedbench.train.round_plan import plan_round


class FleetView:
    def __init__(self, devices: Sequence[DeviceSpec], experiment: Experiment) -> None:
        profile_names, codes = profile_column(devices)
        first = by_profile(devices)
        # The profiles costs are emulated from (host and physical devices have none).
        self.profiles: dict[str, DeviceProfile] = {}
        for name in profile_names:
            profile = profile_of(first[name])
            if profile is not None:
                self.profiles[name] = profile
        self.groups: dict[str, np.ndarray] = {
            p: np.flatnonzero(codes == c) for c, p in enumerate(profile_names) if p in self.profiles
        }
        self.meters = {
            p: make_meter(first[p], experiment.fleet.knobs, workload_optimizer(experiment.train))
            for p in self.groups
        }
        # Each device's profile as a code into `self.names` (-1: none), one int per device.
        self.names = list(self.groups)
        self.code = np.full(len(devices), -1, dtype=np.int32)
        for code, idx in enumerate(self.groups.values()):
            self.code[idx] = code
        config = experiment.fleet.population
        self.population: Population | None = None
        if config is not None:
            profiles = [self.profiles[name] for name in self.names]
            self.population = draw(
                config, profiles, self.code, experiment.seed, DeviceNames(devices)
            )
        self.cursor: Cursor | None = None  # each device's windows as of the clock (population)
        self.low_battery = 0  # devices in a window but below the floor, at the last update

    def predict(
        self,
        ledger: Ledger,
        model: nn.Module,
        experiment: Experiment,
        scenario: Scenario,
        ctx: DataContext,
    ) -> None:
        """Fill the ledger's pred_* arrays: one emulation per profile, scaled per device.

        A device's round is ~linear in its number of optimizer steps, so the
        profile's cost for a reference device is scaled by each device's
        expected examples instead of emulating 100,000 devices one by one.
        """
        train = experiment.train
        batch, epochs, mode = train.batch_size, train.local_epochs, train.memory_planner
        model_bytes = sum(v.numel() * v.element_size() for v in model.state_dict().values())
        shape = experiment.model.input_shape
        for name, idx in self.groups.items():
            profile = self.profiles[name]
            examples = scenario.expected_examples_of(ctx, idx)
            ref = max(int(examples[0]), 1)
            job = TrainJob(
                experiment.model.name,
                shape,
                step_sizes(ref, batch, epochs),
                model_bytes,
                0.0,
                None,
                input_dtype=experiment.model.torch_dtype,
                input_high=experiment.model.input_high,
            )
            meter = self.meters[name]
            # The plan the device will run (train.memory_planner), so a device
            # that fits with micro-batches or checkpointing is not predicted oom.
            em = meter.predict(model, plan_round(model, job, meter, mode).job)
            assert em is not None, f"profile {name}: an emulated device's meter predicts"
            scale = examples / ref
            pop = self.population
            if pop is not None:
                scale = scale / pop.speed[idx]
            ledger.pred_peak_mem_mb[idx] = em.peak_mem_mb
            ledger.mem_budget_mb[idx] = em.mem_budget_mb
            ledger.pred_latency_s[idx] = em.latency_s * scale if em.status == "ok" else np.inf
            ledger.pred_energy_j[idx] = em.energy_j * scale if em.status == "ok" else np.inf
            ledger.pred_comm_s[idx] = em.comm_s
            trips = profile.thermal.trips
            ledger.throttle_temp_c[idx] = trips[0].temp_c if trips else profile.thermal.critical_c
            if pop is not None:
                # Each device's own link, without a round's jitter.
                ledger.pred_comm_s[idx] = link_s(
                    pop.down_mbps[idx], pop.up_mbps[idx], pop.rtt_ms[idx], model_bytes
                )
                # Every device starts at its drawn level and the profile's ambient, so
                # the first round starts from the population, not from a full battery.
                ledger.battery_pct[idx] = pop.battery0_pct[idx]
                ledger.battery_time_s[idx] = 0.0
                ledger.temp_c[idx] = profile.thermal.ambient_c
                ledger.state_time_s[idx] = 0.0

    def start_windows(self, ledger: Ledger) -> None:
        """Every device's availability window as of the run's start (a population's only).

        The first look at the windows reads every row of them: 0.4-1.4 s at
        1,000,000 devices, once per run. Done here, before the first round, it is
        start-up (like drawing the population) and every round then re-reads only
        the devices that crossed a window edge since the last (Cursor).
        """
        pop = self.population
        if pop is None:
            return
        times = ledger.battery_time_s[~np.isnan(ledger.battery_time_s)]
        start_s = float(times.max()) if len(times) else 0.0  # resumed: the last round's end
        self.cursor = Cursor(pop.windows)
        n = len(ledger)
        self.cursor.at_all(np.full(n, start_s), np.ones(n, dtype=bool))

    def update_availability(self, ledger: Ledger, now_s: float) -> None:
        pop = self.population
        if pop is None:
            for name, idx in self.groups.items():
                ledger.available[idx] = is_available(self.profiles[name], now_s)
            return
        if self.cursor is None:  # kept from round to round: only edges crossed are re-read
            self.cursor = Cursor(pop.windows)
        ledger.battery_pct[:] = advance(
            ledger.battery_pct,
            ledger.battery_time_s,
            now_s,
            pop.windows,
            pop.idle_w,
            pop.charge_w,
            pop.capacity_wh,
            self.cursor,
        )
        # A device still training past now (a late reply) keeps its own, later time.
        kept = ~np.isnan(ledger.battery_time_s)
        ledger.battery_time_s[kept] = np.maximum(ledger.battery_time_s[kept], now_s)
        n = len(ledger)
        self.cursor.at_all(np.full(n, now_s), np.ones(n, dtype=bool))
        window = self.cursor.inside | ~pop.windows.described
        low = ledger.battery_pct < pop.floor_pct  # NaN (no battery): False
        ledger.available[:] = window & ~low
        self.low_battery = int((window & low).sum())

    def available_at(self, device: int, at_s: float) -> bool:
        """Whether device `device` is available at virtual time `at_s` (no profile: always)."""
        code = int(self.code[device])
        if code < 0:
            return True
        if self.population is not None:
            return self.population.windows.device_inside(device, at_s)
        return is_available(self.profiles[self.names[code]], at_s)

    def traits(self, server_round: int, device: int) -> Traits | None:
        """What the device's train message carries of its draw (None: no population)."""
        if self.population is None or self.code[device] < 0:
            return None
        return self.population.traits(server_round, device)
