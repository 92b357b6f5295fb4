"""Run-time knobs on an emulated device: processor, pinned cores, a clock, background priority.

A fleet config may set them for every emulated device (`fleet.knobs`); the
bench CLI takes them as `device=` (spelled `processor=` there, since
`device=` names the profile), `cores=`, `clusters=`, `freq_ghz=`,
`background=`, `framework=`. They are validated against the profile when
the emulator places the training threads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from fedbench.errors import FedbenchError, closest

PROCESSORS: tuple[str, ...] = ("cpu", "gpu")


@dataclass(frozen=True)
class Knobs:
    # Which processor trains: the CPU clusters, or the profile's GPU (a
    # profile without a `gpu` section refuses "gpu").
    device: str = "cpu"
    # Training threads; None = the profile's framework default. Threads go
    # to the fastest cores first (as MNN and Android's big-core affinity do).
    cores: int | None = None
    # Restrict the threads to these clusters (by profile cluster name);
    # empty = any cluster.
    clusters: tuple[str, ...] = ()
    # Fix every cluster's clock (the userspace governor; snapped down to a
    # DVFS step). None: the profile's default governor decides.
    freq_ghz: float | None = None
    # Train as a background (low priority) process: the OS gives it only
    # the profile's `os.background_share` of the CPU.
    background: bool = False
    # Override the profile's software stack (a framework with fitted constants).
    framework: str | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str = "knobs") -> Knobs:
        """Knobs from config/CLI values (strings allowed, e.g. from the command line)."""
        valid = [f.name for f in fields(cls)]
        for key in values:
            if key not in valid:
                hint = closest(str(key), valid)
                raise FedbenchError(f"{where}.{key}: unknown knob{hint}; valid: {', '.join(valid)}")
        out: dict[str, Any] = {}
        for key, raw in values.items():
            if raw is None:
                continue
            out[key] = _convert(key, raw, f"{where}.{key}")
        return cls(**out)


def _convert(key: str, raw: Any, where: str) -> Any:
    try:
        if key == "cores":
            value = int(raw)
            if isinstance(raw, bool) or value != float(raw) or value < 1:
                raise ValueError
            return value
        if key == "freq_ghz":
            f = float(raw)
            if isinstance(raw, bool) or not 0.01 <= f <= 5.0:
                raise ValueError
            return f
        if key == "background":
            if isinstance(raw, bool):
                return raw
            text = str(raw).lower()
            if text not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return text in ("true", "1", "yes")
        if key == "device":
            text = str(raw).lower()
            if text not in PROCESSORS:
                raise ValueError
            return text
        if key == "clusters":
            items = raw.split(",") if isinstance(raw, str) else list(raw)
            return tuple(str(x).strip() for x in items if str(x).strip())
        return str(raw)
    except (TypeError, ValueError):
        expected = {
            "cores": "a positive integer",
            "freq_ghz": "a clock in GHz in [0.01, 5] (not MHz)",
            "background": "true or false",
            "device": "cpu or gpu",
        }.get(key, "a string")
        raise FedbenchError(f"{where}: expected {expected}, got {raw!r}") from None
