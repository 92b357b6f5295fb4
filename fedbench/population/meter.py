"""One population device's cost, re-exported from fedbench.devices (variation, emulated_meter)."""

from fedbench.devices.emulated_meter import VariedMeter
from fedbench.devices.variation import (
    RADIO_MW,
    comm_energy_j,
    comm_s,
    radio_energy_j,
    varied_profile,
)

__all__ = ["RADIO_MW", "VariedMeter", "comm_energy_j", "comm_s", "radio_energy_j", "varied_profile"]
