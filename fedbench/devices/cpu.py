"""Where the training threads run, at what clock, and what the cores draw.

Threads go to the fastest cores first (per-core peak at the current clock),
optionally restricted to named clusters. A clock knob fixes the clock
(the userspace governor: the highest DVFS step under it). Otherwise the
profile's default governor decides: "top" runs busy clusters at their top
step, "sustained" (phones) at the share of it the phone's power management
holds under a sustained load (a shared fitted constant; an average over
DVFS transitions, so not snapped to a step). A thermal trip caps either.

Under "sustained" the clocks also follow the load (`load_clocks`): Android's
schedutil raises a cluster's clock to 1.25x what its busy share needs, so a
cluster settles where its cores are busy 80% of the time. The main thread's
cluster is busy the whole step (it runs its share of every parallel call and
all the serial work), but the worker threads sleep through the framework's
host work (building and dispatching the graph), so a worker-only cluster
that is busy for less than four times that host work runs below the
sustained clock (the Meizu 16T's LeNet rows: at the default governor a
small step was measured slower than at a fixed mid clock,
calibration/report.md). Core power follows
P = C V^2 f with the voltage rising linearly with the clock from a floor,
so dynamic power goes roughly with f^3 near the top of the range and
linearly near the bottom, as DVFS tables do.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fedbench.devices.constants import Constants
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import Cluster, DeviceProfile
from fedbench.errors import FedbenchError, choices


@dataclass(frozen=True)
class Active:
    """Training threads on one cluster at one clock."""

    cluster: Cluster
    threads: int
    freq_ghz: float
    # The default governor sets this clock (not a clock knob), so it follows the load.
    governed: bool = False


# schedutil's frequency headroom (kernel/sched/cpufreq_schedutil.c, map_util_freq:
# next_freq = 1.25 x max_freq x util): its steady state is a cluster busy 1 / 1.25
# of the time.
SCHEDUTIL_BUSY_SHARE = 0.8


def snap_freq(cluster: Cluster, cap_ghz: float | None) -> float:
    """The highest DVFS step at or under the cap (the lowest step if the cap is below all)."""
    limit = cluster.max_freq_ghz if cap_ghz is None else min(cap_ghz, cluster.max_freq_ghz)
    under = [f for f in cluster.dvfs_ghz if f <= limit + 1e-9]
    return under[-1] if under else cluster.dvfs_ghz[0]


def place(
    profile: DeviceProfile, knobs: Knobs, consts: Constants, cap_ghz: float | None
) -> tuple[Active, ...]:
    """Assign the training threads to cores, fastest first, at the capped clocks."""
    names = knobs.clusters or tuple(c.name for c in profile.clusters)
    pool = [profile.cluster(n) for n in dict.fromkeys(names)]
    available = sum(c.cores for c in pool)
    threads = knobs.cores if knobs.cores is not None else min(profile.framework.threads, available)
    if threads > available:
        raise FedbenchError(
            f"knobs.cores={threads}: {profile.name} has {available} cores in clusters "
            f"{choices(c.name for c in pool)}"
        )
    caps = [c for c in (knobs.freq_ghz, cap_ghz) if c is not None]
    cap = min(caps) if caps else None
    sustained = (
        consts.fitted.shared.phone_sustained_clock
        if knobs.freq_ghz is None and profile.os.governor == "sustained"
        else None
    )

    def clock(c: Cluster) -> float:
        snapped = snap_freq(c, cap)
        return snapped if sustained is None else min(snapped, sustained * c.max_freq_ghz)

    def speed(c: Cluster) -> float:
        # Rank by uncapped peak so a clock cap does not reshuffle which
        # cluster is "big" (affinity follows the hardware, not the cap).
        return consts.core_peak_gflops(c.arch, c.max_freq_ghz)

    out: list[Active] = []
    left = threads
    for c in sorted(pool, key=speed, reverse=True):
        if left == 0:
            break
        n = min(c.cores, left)
        out.append(Active(c, n, clock(c), governed=sustained is not None))
        left -= n
    return tuple(out)


def main_thread(active: tuple[Active, ...], consts: Constants) -> Active:
    """Where the main thread runs: the fastest active cores at their clock."""
    return max(active, key=lambda a: consts.core_peak_gflops(a.cluster.arch, a.freq_ghz))


def load_clocks(
    active: tuple[Active, ...], main: Active, busy_s: float, idle_s: float
) -> tuple[Active, ...]:
    """The clocks a load-driven governor settles at for a step whose worker threads are
    busy (or spinning) for `busy_s` seconds and asleep for `idle_s`, while the main
    thread does the framework's host work alone (module docstring).

    A governed cluster without the main thread is busy busy_s / (busy_s + idle_s) of
    the step; under SCHEDUTIL_BUSY_SHARE its clock drops by the ratio that brings the
    busy time up to that share, taking the work to scale with the clock (the
    governor's own assumption), and no lower than the cluster's lowest DVFS step.
    """
    wanted = SCHEDUTIL_BUSY_SHARE / (1.0 - SCHEDUTIL_BUSY_SHARE) * idle_s
    if busy_s <= 0.0 or busy_s >= wanted:
        return active
    ratio = busy_s / wanted
    return tuple(
        replace(a, freq_ghz=max(a.cluster.dvfs_ghz[0], a.freq_ghz * ratio))
        if a.governed and a.cluster.name != main.cluster.name
        else a
        for a in active
    )


def voltage_power_scale(profile: DeviceProfile, cluster: Cluster, freq_ghz: float) -> float:
    """Dynamic power at `freq_ghz` relative to max clock: (f/fmax) (V/Vmax)^2."""
    x = freq_ghz / cluster.max_freq_ghz
    floor = profile.power.voltage_floor
    v = floor + (1.0 - floor) * x
    return x * v * v


def parallel_power_w(profile: DeviceProfile, active: tuple[Active, ...]) -> float:
    """CPU power while every training thread is busy (each active cluster's logic included)."""
    total = 0.0
    for a in active:
        scale = voltage_power_scale(profile, a.cluster, a.freq_ghz)
        total += (a.threads * a.cluster.core_power_w + a.cluster.cluster_power_w) * scale
    return total


def serial_power_w(profile: DeviceProfile, main: Active) -> float:
    """CPU power while only the main thread works (on the fastest active core)."""
    scale = voltage_power_scale(profile, main.cluster, main.freq_ghz)
    return (main.cluster.core_power_w + main.cluster.cluster_power_w) * scale
