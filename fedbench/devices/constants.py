"""The emulator's shared constants: per-architecture specs and fitted efficiencies.

Two data files next to this module:

- `arch_specs.yaml` (hand-written, sourced): FLOPs per cycle of each CPU
  microarchitecture and how much an in-order pipeline loses.
- `fitted_constants.yaml` (written by calibration/fit.py): the few shared
  efficiencies fitted to the published measurements - per op class compute
  and bandwidth efficiency, optimizer bandwidth efficiency, the work size at
  which extra threads become useful, and per framework a speed factor, a
  per-step overhead and an input-pipeline cost.

Device profiles name an `arch` and a `framework`; everything device-specific
(cores, clocks, bandwidth) stays in the profile.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import yaml

from fedbench.devices.schema import Bound, Reader
from fedbench.errors import FedbenchError, choices
from fedbench.measure.workload import OP_CLASSES

HERE = Path(__file__).resolve().parent
ARCH_FILE = HERE / "arch_specs.yaml"
FITTED_FILE = HERE / "fitted_constants.yaml"


@dataclass(frozen=True)
class ArchSpec:
    flops_per_cycle: Annotated[float, Bound("fp32 FLOPs per cycle per core", 1, 64)]
    pipeline: str
    source: str


@dataclass(frozen=True)
class ArchTable:
    arch: Mapping[str, ArchSpec]
    pipeline_efficiency: Mapping[str, float]
    pipeline_efficiency_source: str


@dataclass(frozen=True)
class ClassEfficiency:
    """Share of peak compute and of DRAM bandwidth an op class sustains."""

    compute_eff: Annotated[float, Bound("fraction of peak FLOP rate", 1e-5, 1.0)]
    bandwidth_eff: Annotated[float, Bound("fraction of DRAM bandwidth", 1e-4, 1.0)]


@dataclass(frozen=True)
class FrameworkConstants:
    """What a software stack adds on top of the roofline."""

    speed: Annotated[float, Bound("kernel speed relative to the reference framework", 0.01, 10.0)]
    # Graph dispatch, allocator and bookkeeping per forward+backward pass:
    # serial work on the main thread, so counted in cycles of one core.
    step_overhead_mcycles: Annotated[float, Bound("Mcycles per pass", 0.0, 1e5)]
    # Loading/decoding/copying one input byte (also serial, main thread).
    input_cycles_per_byte: Annotated[float, Bound("cycles per input byte", 0.0, 1e4)] = 0.0


@dataclass(frozen=True)
class Fitted:
    op_class: Mapping[str, ClassEfficiency]
    optimizer: ClassEfficiency
    # Class work per pass (GFLOP) at which the threads beyond the first are
    # half used: small operators do not split well across cores (paper 001:
    # larger batches gain intra-operator parallelism).
    parallel_half_work_gflop: Annotated[float, Bound("GFLOP", 1e-6, 1e3)]
    framework: Mapping[str, FrameworkConstants]
    fit: Mapping[str, str]  # how and when the numbers were fitted, and to what


@dataclass(frozen=True)
class Constants:
    archs: ArchTable
    fitted: Fitted

    def arch(self, name: str) -> ArchSpec:
        return self.archs.arch[name]

    def core_peak_gflops(self, arch: str, freq_ghz: float) -> float:
        """Sustainable peak of one core: FLOPs/cycle x clock x pipeline efficiency."""
        spec = self.archs.arch[arch]
        return spec.flops_per_cycle * freq_ghz * self.archs.pipeline_efficiency[spec.pipeline]

    def core_ipc_scale(self, arch: str) -> float:
        """Relative speed of serial (scalar) work per cycle on this core."""
        return self.archs.pipeline_efficiency[self.archs.arch[arch].pipeline]

    def framework(self, name: str) -> FrameworkConstants:
        try:
            return self.fitted.framework[name]
        except KeyError:
            raise FedbenchError(
                f"framework '{name}' has no fitted constants in {FITTED_FILE.name}; "
                f"valid: {choices(self.fitted.framework)}"
            ) from None


def _read(path: Path) -> object:
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise FedbenchError(f"{path}: missing (run calibration/fit.py to write it)") from None
    except yaml.YAMLError as exc:
        raise FedbenchError(f"{path}: not valid YAML: {exc}") from None


def load_arch_table(path: Path = ARCH_FILE) -> ArchTable:
    reader = Reader(str(path))
    table = reader.build(ArchTable, _read(path))
    for name, spec in table.arch.items():
        if spec.pipeline not in table.pipeline_efficiency:
            raise reader.fail(
                f"arch.{name}.pipeline",
                f"expected one of {choices(table.pipeline_efficiency)}, got {spec.pipeline!r}",
            )
    return table


def parse_fitted(data: object, file: str) -> Fitted:
    reader = Reader(file)
    fitted = reader.build(Fitted, data)
    missing = [c for c in OP_CLASSES if c not in fitted.op_class]
    if missing or set(fitted.op_class) - set(OP_CLASSES):
        raise reader.fail("op_class", f"expected exactly the classes {', '.join(OP_CLASSES)}")
    if not fitted.framework:
        raise reader.fail("framework", "expected at least one framework")
    return fitted


@functools.lru_cache(maxsize=1)
def load_constants() -> Constants:
    """The shipped constants (cached: they are read-only data)."""
    return Constants(load_arch_table(), parse_fitted(_read(FITTED_FILE), str(FITTED_FILE)))
