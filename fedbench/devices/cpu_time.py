"""Work the op trace does not see, costed from the call's measured CPU time.

A user's train handler on an emulated device is costed from the aten ops it
ran (fedbench.measure.live: the `ops` basis). Work that is not torch -
scikit-learn, numpy, XGBoost, parsing a data file - runs no such op: costed
by its ops alone, an L-BFGS fit cost a phone 0.1 ms. What the host measured
about the call costs that work instead, through the emulator like any other
serial work on the device's main core:

- **outside**: the process CPU seconds of the call's stretches outside torch
  ops, each at least `fedbench.measure.live.GAP_S` long (a torch loop's own
  Python between its ops is shorter, and is what the ops basis's per-call
  dispatch and per-step overhead already charge);
- **cycles**: outside x the host's core clock (fedbench.measure.usage.
  host_core_ghz), the host taken as an out-of-order core (IPC scale 1,
  arch_specs.yaml);
- **device seconds**: cycles / (the device's main-core clock x its IPC scale
  x the unit's speed) / the background share: the emulator's own model of
  serial work (the framework's dispatch is costed the same way), at the clock
  the profile's governor gives the main core; throttling stretches it like
  every other term;
- **rule**: a call that ran no op the emulator costs is costed from its CPU
  time (basis `cpu_time`); a call that did keeps its ops and adds the outside
  work (basis `ops+cpu_time`) when that work, on the device, is more than
  `TOLERANCE` of the ops' latency - below it, it is within the emulator's own
  error and the row keeps the exact, host-independent `ops` figures. The
  added work runs on the main core: the core's serial power and the idle
  power over its seconds, heat, battery;
- **memory**: a call costed from its CPU time alone holds the weights and what
  the resident set grew by during the call (fedbench.measure.usage), checked
  against the budget (and faulted in once, where the profile's framework
  charges faults). A call that ran ops keeps the ops' memory: the tensors'
  peak is known exactly there, while the resident set's growth also holds
  whatever the process first touched in that call (an import, glibc's and
  torch's caches) - a first small model's call grew it 14 MB, a later one 16x
  its size 7 MB (tests/client/test_device_mod.py) - and would make the peak
  depend on the worker's history.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fedbench.core.workload import OP_CLASSES, OpCost, Workload
from fedbench.devices.constants import load_constants
from fedbench.devices.cpu import main_thread, place
from fedbench.devices.emulator import Emulation
from fedbench.devices.kernels import GB
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import DeviceProfile
from fedbench.measure.usage import host_core_ghz

# Outside work under this share of the ops' latency is left out (the emulator's own
# error: calibration/report.md's leave-one-out MAPE is 14%).
TOLERANCE = 0.05
# The host's IPC scale: a server's or a laptop's core is out of order (arch_specs.yaml).
HOST_IPC_SCALE = 1.0
MB = float(1 << 20)


@dataclass(frozen=True)
class Measured:
    """What the host measured about one watched call."""

    outside_cpu_s: float  # CPU seconds of the call's long stretches outside torch ops
    growth_mb: float  # the resident set's peak growth during the call (NaN: unknown)
    ran_ops: bool  # whether it ran any op the emulator costs


def serial_seconds(profile: DeviceProfile, knobs: Knobs, speed: float, cycles: float) -> float:
    """Seconds `cycles` of serial work take on the device's main core, unthrottled."""
    consts = load_constants()
    main = main_thread(place(profile, knobs, consts, None), consts)
    rate = main.freq_ghz * consts.core_ipc_scale(main.cluster.arch) * GB * speed
    share = profile.os.background_share if knobs.background else 1.0
    return cycles / rate / share


def measured_work(workload: Workload, cycles: float, growth_mb: float) -> Workload:
    """The call's work outside torch as a workload of its own: `cycles` of serial work and
    the resident set's growth as its memory, beside the weights; no optimizer step."""
    grown = growth_mb * MB if math.isfinite(growth_mb) else 0.0
    nothing = {c: OpCost(0.0, 0.0) for c in OP_CLASSES}
    return Workload(
        model=workload.model,
        input_shape=(),
        batch_size=0,
        plan="measured",
        num_params=workload.num_params,
        forward=nothing,
        backward=nothing,
        optimizer=OpCost(0.0, 0.0),
        param_bytes=workload.param_bytes,
        grad_bytes=0,
        optimizer_state_bytes=0,
        saved_activation_bytes=0,
        workspace_bytes=int(grown),
        input_bytes=0,
        steps_per_update=0,
        measured_cycles=cycles,
    )


def with_cpu_time(
    ops: Emulation,
    workload: tuple[Workload, int],
    measured: Measured,
    device: tuple[DeviceProfile, Knobs, float],
    rerun: Callable[[list[tuple[Workload, int]]], Emulation],
) -> tuple[Emulation, str]:
    """(the call's emulation, its basis) under the rule of the module docstring.

    `ops`: the emulation of `workload` (the ops' step and its count) alone;
    `device`: (profile, knobs, speed) of the unit; `rerun`: the emulator on a
    list of (workload, count) from the same state, under the same budget.
    """
    if ops.status != "ok":  # its weights alone do not fit: nothing ran on the device
        return ops, "ops"
    cycles = measured.outside_cpu_s * host_core_ghz() * HOST_IPC_SCALE * GB
    outside = measured_work(workload[0], cycles, measured.growth_mb)
    if not measured.ran_ops:
        return rerun([(outside, 1)]), "cpu_time"
    profile, knobs, speed = device
    if serial_seconds(profile, knobs, speed, cycles) <= TOLERANCE * ops.latency_s:
        return ops, "ops"
    outside = measured_work(workload[0], cycles, math.nan)  # the ops' memory (docstring)
    return rerun([workload, (outside, 1)]), "ops+cpu_time"
