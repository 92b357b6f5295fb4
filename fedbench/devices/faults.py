"""Injected device faults: what real fleets do to a round, on purpose and reproducibly.

The fleet config may give each profile (or all devices) a fault model:

    fleet:
      faults:
        default: {dropout: 0.05}
        rpi3bplus: {crash: 0.1, slowdown: 0.2, slowdown_factor: 4.0}

Per round and device one draw decides, from a generator seeded by (seed,
round, device), so a run and its resumed copy fault identically:

- `dropout`: the device leaves before training (status dropped, no work done).
- `crash`: the ClientApp raises at the end of training, before it replies;
  Flower returns an error reply and the server records it as failed with the
  error text (a crashed device reports nothing, so when it crashed is moot).
- `slowdown`: this round's compute takes `slowdown_factor` times longer
  (background load, thermal event); with a deadline it may time out.
- `network_loss`: training completes (its energy is spent) but the upload is
  lost (status dropped).
- `nan_update` / `bad_update`: the reply carries NaN weights / a tensor of the
  wrong shape - the server must detect it and keep it out of the average.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from fedbench.errors import FedbenchError, choices

KINDS: tuple[str, ...] = ("dropout", "crash", "network_loss", "nan_update", "bad_update")


class InjectedCrash(RuntimeError):
    """Raised inside training by the `crash` fault."""


@dataclass(frozen=True)
class FaultModel:
    dropout: float = 0.0
    crash: float = 0.0
    network_loss: float = 0.0
    nan_update: float = 0.0
    bad_update: float = 0.0
    slowdown: float = 0.0
    slowdown_factor: float = 3.0

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], where: str) -> FaultModel:
        valid = [f.name for f in fields(cls)]
        for key, value in values.items():
            if key not in valid:
                raise FedbenchError(f"{where}: unknown fault '{key}'; valid: {choices(valid)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise FedbenchError(f"{where}.{key} must be a number, got {value!r}")
        model = cls(**{k: float(v) for k, v in values.items()})
        probs = [getattr(model, k) for k in (*KINDS, "slowdown")]
        if any(not 0.0 <= p <= 1.0 for p in probs):
            raise FedbenchError(
                f"{where}: fault probabilities must be in [0, 1], got {dict(values)}"
            )
        if sum(getattr(model, k) for k in KINDS) > 1.0:
            raise FedbenchError(f"{where}: {', '.join(KINDS)} add up to more than 1")
        if model.slowdown_factor < 1.0:
            raise FedbenchError(
                f"{where}.slowdown_factor must be >= 1, got {model.slowdown_factor}"
            )
        return model


@dataclass(frozen=True)
class Fault:
    """This round's fault for one device ("" = none) and its slowdown factor."""

    kind: str
    slowdown: float


NONE = Fault("", 1.0)


def fault_models(faults: Mapping[str, Any] | None) -> dict[str, FaultModel]:
    """Profile name (or "default") -> FaultModel, validated."""
    if not faults:
        return {}
    return {
        str(name): FaultModel.from_mapping(values or {}, f"fleet.faults.{name}")
        for name, values in faults.items()
    }


def draw(models: Mapping[str, FaultModel], profile: str, seed: int, rnd: int, device: int) -> Fault:
    model = models.get(profile) or models.get("default")
    if model is None:
        return NONE
    rng = np.random.default_rng([seed, rnd, device, 0xFA17])
    u, v = rng.random(2)
    kind, edge = "", 0.0
    for name in KINDS:  # one fault at most: the kinds split [0, 1) into bands
        edge += getattr(model, name)
        if u < edge:
            kind = name
            break
    slow = model.slowdown_factor if v < model.slowdown else 1.0
    return Fault(kind, slow)
