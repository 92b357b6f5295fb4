"""What crosses the wire between the ServerApp and the ClientApp.

Record names and the per-round task keys are spelled here only. The static
experiment travels as JSON (fedbench.config); the RoundReport has its own
module (fedbench.report.records).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flwr.app import ConfigRecord

from fedbench.devices.meter import DeviceState
from fedbench.errors import FedbenchError

ARRAYS = "arrays"
CONFIG = "config"
METRICS = "metrics"
IDENTITY = "identity"
NUM_EXAMPLES = "num-examples"  # the key FedAvg weights by


@dataclass(frozen=True)
class TrainTask:
    """One device's job in one round."""

    round: int
    day: int
    device_index: int
    now_s: float  # virtual time at which the round starts
    state: DeviceState | None  # last emulated state (None: the device's first round)

    def to_config(self) -> ConfigRecord:
        state = self.state or DeviceState(math.nan, math.nan, math.nan)
        return ConfigRecord(
            {
                "round": self.round,
                "day": self.day,
                "device-index": self.device_index,
                "now-s": self.now_s,
                "state-temp-c": state.temp_c,
                "state-battery-pct": state.battery_pct,
                "state-time-s": state.time_s,
            }
        )

    @classmethod
    def from_config(cls, record: ConfigRecord) -> TrainTask:
        try:
            state = DeviceState(
                float(record["state-temp-c"]),  # type: ignore[arg-type]
                float(record["state-battery-pct"]),  # type: ignore[arg-type]
                float(record["state-time-s"]),  # type: ignore[arg-type]
            )
            return cls(
                round=int(record["round"]),  # type: ignore[arg-type]
                day=int(record["day"]),  # type: ignore[arg-type]
                device_index=int(record["device-index"]),  # type: ignore[arg-type]
                now_s=float(record["now-s"]),  # type: ignore[arg-type]
                state=None if math.isnan(state.time_s) else state,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FedbenchError(f"malformed server message: bad train task ({exc})") from None


@dataclass(frozen=True)
class Identity:
    """What a node says about itself when the server asks (before round 1)."""

    partition_id: int  # -1 for a device outside the configured fleet
    device: str
    profile: str
    kind: str
    node: int = -1  # Flower's node id, filled in by the server from the transport

    def to_config(self) -> ConfigRecord:
        return ConfigRecord(
            {
                "partition-id": self.partition_id,
                "device": self.device,
                "profile": self.profile,
                "kind": self.kind,
            }
        )

    @classmethod
    def from_config(cls, record: ConfigRecord) -> Identity:
        try:
            return cls(
                int(record["partition-id"]),  # type: ignore[arg-type]
                str(record["device"]),
                str(record["profile"]),
                str(record["kind"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FedbenchError(f"malformed client reply: bad identity ({exc})") from None
