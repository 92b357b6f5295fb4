"""Which device a study runs on: this host, timed for real, or an emulated profile.

The two are imported when picked: a study on a profile never loads the host's timing
machinery, nor one on this host the emulator.
"""

from __future__ import annotations

from fedbench.characterize.device import PROCESSORS, THIS, Device, HostOptions
from fedbench.characterize.workloads import WorkloadBook
from fedbench.errors import FedbenchError, choices, closest


def open_device(name: str, book: WorkloadBook, host: HostOptions, processor: str = "cpu") -> Device:
    """`this` or a profile name; `processor=gpu` trains on the profile's GPU."""
    if processor not in PROCESSORS:
        raise FedbenchError(f"processor={processor!r}: valid: {choices(PROCESSORS)}")
    if name == THIS:
        if processor != "cpu":
            raise FedbenchError(
                f"processor={processor}: only for emulated profiles with a GPU; "
                f"device={THIS} measures this host's CPU"
            )
        from fedbench.characterize.host import HostDevice

        return HostDevice(book, host)
    from fedbench.characterize.emulated import EmulatedDevice
    from fedbench.devices.profile import load_profile, profile_names

    names = profile_names()
    if name not in names:
        raise FedbenchError(
            f"device={name!r}: no such profile{closest(name, names)}; "
            f"valid: {THIS}, {choices(names)}"
        )
    profile = load_profile(name)
    if processor == "gpu" and profile.gpu is None:
        with_gpu = [n for n in names if load_profile(n).gpu is not None]
        raise FedbenchError(
            f"processor=gpu: profile {name} has no GPU; profiles with one: {choices(with_gpu)}"
        )
    return EmulatedDevice(book, profile, processor)
