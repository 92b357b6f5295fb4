"""An emulated device: every figure from the measured workload and the profile.

One step is emulated from the device's idle state (one step does not heat
a device measurably), so a figure is the steady per-step cost paper 000
reports after its warm-up steps. Nothing trains; the same study on any
host gives the same numbers.
"""

from __future__ import annotations

from fedbench.characterize.device import CpuConfig, Device, PhaseTime, StepJob, StepResult
from fedbench.characterize.models import ModelRef
from fedbench.characterize.workloads import WorkloadBook, forward_pass
from fedbench.core.workload import OP_CLASSES, Workload
from fedbench.devices.constants import load_constants
from fedbench.devices.emulator import Emulation, emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import Cluster, DeviceProfile, initial_state
from fedbench.devices.step import TIME_TERMS

LEVELS: tuple[str, ...] = ("H", "M", "L")
# Below every DVFS step: the emulator snaps a cap under the lowest step to
# each cluster's lowest step (fedbench.devices.cpu.snap_freq).
LOWEST_CAP_GHZ = 0.01


def core_counts(total: int) -> list[int]:
    """1, 2, 4, ... up to `total`, and `total` itself (paper 001: 1x, 2x, 4x)."""
    counts = [n for n in (1 << i for i in range(total.bit_length())) if n <= total]
    return counts if counts[-1] == total else [*counts, total]


def top_cap_ghz(clusters: list[Cluster]) -> float:
    """A cap at the group's highest DVFS step: every cluster at its own top step, set
    as paper 001 set its levels (not left to a phone's default governor, which holds
    less under a sustained load: fedbench.devices.cpu)."""
    return max(c.max_freq_ghz for c in clusters)


def middle_cap_ghz(clusters: list[Cluster]) -> float:
    """A cap midway between the lowest and highest DVFS step of the group's fastest cluster."""
    top = max(clusters, key=lambda c: c.max_freq_ghz)
    return 0.5 * (top.dvfs_ghz[0] + top.dvfs_ghz[-1])


def core_groups(profile: DeviceProfile) -> list[tuple[str, list[Cluster]]]:
    """big (all but the slowest clusters), little (the slowest), hybrid (all); or all.

    Speed is a core's modelled peak at its top clock; clusters the emulator
    models as equally fast (the TX2's Denver2 and A57) are one kind of core.
    """
    consts = load_constants()

    def peak(c: Cluster) -> float:
        return consts.core_peak_gflops(c.arch, c.max_freq_ghz)

    ranked = sorted(profile.clusters, key=peak, reverse=True)
    slowest = peak(ranked[-1])
    big = [c for c in ranked if peak(c) > slowest]
    little = [c for c in ranked if peak(c) == slowest]
    if not big:
        return [("all", ranked)]
    return [("big", big), ("little", little), ("hybrid", ranked)]


class EmulatedDevice(Device):
    kind = "emulated"

    def __init__(self, book: WorkloadBook, profile: DeviceProfile, processor: str = "cpu") -> None:
        super().__init__(book)
        self.profile = profile
        self.processor = processor  # knobs.device: the CPU clusters or the profile's GPU
        self.name = profile.name if processor == "cpu" else f"{profile.name} (GPU)"

    @property
    def fleet_profile(self) -> str:
        return self.profile.name

    def _emulate(self, w: Workload, knobs: Knobs) -> Emulation:
        return emulate(self.profile, [(w, 1)], initial_state(self.profile, 0.0), knobs)

    def step(self, job: StepJob) -> StepResult:
        w, source = self.book.get(job.model, job.batch_size)
        if job.forward_only:
            w = forward_pass(w)
        cpu = job.cpu
        knobs = Knobs(
            device=self.processor,
            cores=cpu.cores if cpu else None,
            clusters=cpu.clusters if cpu else (),
            freq_ghz=cpu.freq_cap_ghz if cpu else None,
            background=job.priority == "background",
        )
        e = self._emulate(w, knobs)
        return StepResult(
            status=e.status,
            reason=e.reason,
            step_latency_s=e.latency_s,
            energy_j=e.energy_j,
            energy_idle_j=e.energy_terms_j["idle"] if e.status == "ok" else e.energy_j,
            avg_power_w=e.avg_power_w,
            peak_mem_mb=e.peak_mem_mb,
            mem_budget_mb=e.mem_budget_mb,
            freq_ghz=e.freq_ghz_avg,
            workload=w,
            workload_source=source,
        )

    def phase_times(self, model: ModelRef, batch_size: int) -> tuple[str, list[PhaseTime]]:
        w, _ = self.book.get(model, batch_size)
        knobs = Knobs(device=self.processor)
        full = self._emulate(w, knobs)
        if full.status != "ok":
            return full.status, []
        # Every call is its own roofline term, so emulating the forward pass
        # alone gives exactly the forward share of every class and term.
        fwd = self._emulate(forward_pass(w), knobs)
        cells = [PhaseTime("forward", c, fwd.time_s[c]) for c in OP_CLASSES]
        cells += [PhaseTime("backward", c, full.time_s[c] - fwd.time_s[c]) for c in OP_CLASSES]
        cells.append(PhaseTime("optimizer", "update", full.time_s["optimizer"]))
        other = [t for t in TIME_TERMS if t not in OP_CLASSES and t != "optimizer"]
        cells += [PhaseTime("other", t, full.time_s[t]) for t in other]
        return "ok", cells

    def cpu_configs(self) -> list[CpuConfig]:
        if self.processor != "cpu":
            return []  # the GPU has no core or clock configurations to sweep
        out: list[CpuConfig] = []
        for group, clusters in core_groups(self.profile):
            names = tuple(c.name for c in clusters)
            caps = {"H": top_cap_ghz(clusters), "M": middle_cap_ghz(clusters), "L": LOWEST_CAP_GHZ}
            for n in core_counts(sum(c.cores for c in clusters)):
                if group == "hybrid" and n < sum(c.cores for c in clusters):
                    continue  # paper 001's hybrid row uses every core
                out += [
                    CpuConfig(group, n, lv, clusters=names, freq_cap_ghz=caps[lv]) for lv in LEVELS
                ]
        return out
