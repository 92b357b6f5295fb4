"""Real measurement on physical devices: sensors sampled around training.

`Probe` (sampler.py) samples CPU utilisation and frequency, process and
system memory, temperatures and whatever power sensor the device has
(RAPL, Jetson INA3221 rails, battery, NVML) into a `ProbeTrace`
(trace.py), whose summaries fill a RoundReport's cost fields
(fedbench/devices/probe_meter.py) and the per-operator table
(fedbench/measure/opprofile.py). One module per source; a source the
device lacks is absent, never zero.
"""

from __future__ import annotations

from fedbench.measure.probe.sampler import SOURCE_TYPES, Probe, default_sources
from fedbench.measure.probe.source import COMPONENT, DEVICE, PowerSource, Source
from fedbench.measure.probe.trace import ProbeTrace

__all__ = [
    "COMPONENT",
    "DEVICE",
    "SOURCE_TYPES",
    "PowerSource",
    "Probe",
    "ProbeTrace",
    "Source",
    "default_sources",
]
