"""What crosses the wire between fedbench's server and its device mod, spelled once.

A train message from fedbench is whatever the Flower strategy (`algorithm=`)
built - `arrays` and `config`, which the ClientApp reads as usual - plus one
ConfigRecord, `fedbench`, that says which fleet device trains (`TrainTask`)
and carries the experiment. The device mod takes that record out before the
ClientApp sees the message and puts the RoundReport (`fedbench-report`) and
the device's emulated state (`fedbench-state`) into the reply. A reply
without them comes from a ClientApp that runs without the mod: an
unprofiled device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from flwr.app import ConfigRecord

from fedbench.devices.meter import DeviceState
from fedbench.errors import FedbenchError
from fedbench.experiment.codec import EXPERIMENT_KEY

TASK = "fedbench"  # the ConfigRecord fedbench adds to a train (or evaluate) message
REPORT = "fedbench-report"  # the RoundReport in a reply (fedbench.report.records)
STATE = "fedbench-state"  # the device's emulated state after the round
ARRAYS = "arrays"  # Flower's default ArrayRecord key (FedAvg's arrayrecord_key)
METRICS = "metrics"  # the MetricRecord of a reply (Flower's convention)
NUM_EXAMPLES = "num-examples"  # the key Flower's strategies weight by
# In a reply's report: the name a physical device announced (`--name`); the
# server refuses it unless it is the name its registered key was issued for.
NODE_NAME = "node-name"
# Metric keys a ClientApp may report its training loss under (fedbench's own:
# train_loss; Flower's quickstarts: train_loss).
LOSS_KEYS: tuple[str, ...] = ("train_loss", "train-loss", "loss")


@dataclass(frozen=True)
class TrainTask:
    """One device's job in one round, as the server hands it to the device mod."""

    round: int
    day: int
    device_index: int
    device: str  # the device's name in the fleet (checked against the index)
    now_s: float  # virtual time at which the device starts
    model_version: int  # the global model version sent (aggregations so far)
    state: DeviceState | None  # last emulated state (None: the device's first round)

    def to_record(self, experiment_json: str) -> ConfigRecord:
        state = self.state or DeviceState(math.nan, math.nan, math.nan)
        return ConfigRecord(
            {
                EXPERIMENT_KEY: experiment_json,
                "round": self.round,
                "day": self.day,
                "device-index": self.device_index,
                "device": self.device,
                "now-s": self.now_s,
                "model-version": self.model_version,
                "state-temp-c": state.temp_c,
                "state-battery-pct": state.battery_pct,
                "state-time-s": state.time_s,
            }
        )

    @classmethod
    def from_record(cls, record: ConfigRecord) -> TrainTask:
        try:
            state = state_from(record, "state-")
            return cls(
                round=int(record["round"]),  # type: ignore[arg-type]
                day=int(record["day"]),  # type: ignore[arg-type]
                device_index=int(record["device-index"]),  # type: ignore[arg-type]
                device=str(record["device"]),
                now_s=float(record["now-s"]),  # type: ignore[arg-type]
                model_version=int(record["model-version"]),  # type: ignore[arg-type]
                state=state,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FedbenchError(f"malformed server message: bad train task ({exc})") from None


def state_record(state: DeviceState) -> ConfigRecord:
    return ConfigRecord(
        {"temp-c": state.temp_c, "battery-pct": state.battery_pct, "time-s": state.time_s}
    )


def state_from(record: ConfigRecord, prefix: str = "") -> DeviceState | None:
    """The DeviceState in `record` (None when its time is NaN: no state)."""
    state = DeviceState(
        float(record[f"{prefix}temp-c"]),  # type: ignore[arg-type]
        float(record[f"{prefix}battery-pct"]),  # type: ignore[arg-type]
        float(record[f"{prefix}time-s"]),  # type: ignore[arg-type]
    )
    return None if math.isnan(state.time_s) else state
