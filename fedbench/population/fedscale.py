"""FedScale's device traces -> fedbench's trace tables (fedbench.population.traces).

FedScale (Lai et al., ICML 2022) publishes two pickled dictionaries keyed by
client id, as its "Device Trace File Formats" README describes them:

- `client_device_capacity`: `{client: {"computation": float, "communication": float}}`
  - per-client compute (time per sample: larger is slower) and bandwidth
  (kbit/s, one figure for both directions);
- `client_behave_trace`: `{client: {"duration": int, "inactive": [int], "finish_time": int,
  "active": [int], "model": str}}` - the seconds at which the client becomes
  active and inactive; the pattern repeats every `finish_time` seconds.

Conversion: clients in ascending id order become fleet devices 0, 1, ...
(at most `devices=`); speed = the median client's computation / the
client's (so the median client is its profile); down = up = communication /
1000 Mbit/s (no RTT in the trace: the drawn RTT stays); each active ->
inactive interval is a row in `state=` (charging by default: FedScale's
behaviour trace comes from devices that were charging and idle). The files
are pickles, read with a restricted unpickler (fedbench.trust.unpickle):
only the dicts, lists, numbers and strings FedScale's files hold are built;
a file naming any other global (a crafted payload) is refused, naming it,
and nothing in it runs.

    python -m fedbench.population.fedscale capacity=client_device_capacity \\
        behave=client_behave_trace out=traces/ devices=1000
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fedbench.cli.grammar import Grammar, Key, parse_int
from fedbench.errors import FedbenchError
from fedbench.population.traces import write_table
from fedbench.trust import bounded
from fedbench.trust.unpickle import Refused, load_plain

GRAMMAR = Grammar(
    "python -m fedbench.population.fedscale",
    "Convert FedScale's client_device_capacity / client_behave_trace to fedbench traces.",
    (
        Key("capacity", "FedScale's client_device_capacity pickle"),
        Key("behave", "FedScale's client_behave_trace pickle"),
        Key("out", "folder for capacity.<format> and availability.<format>", required=True),
        Key("devices", "convert at most this many clients (ascending id)", None),
        Key("state", "state of an active interval: charging or available", "charging"),
        Key("format", "csv or parquet (needs pandas + pyarrow)", "csv"),
    ),
    (
        "python -m fedbench.population.fedscale capacity=client_device_capacity "
        "behave=client_behave_trace out=traces/ devices=1000",
    ),
)


def _load(path: str, key: str) -> Mapping[Any, Any]:
    file = Path(path)
    if not file.is_file():
        raise FedbenchError(f"{key}={path!r}: no such file (FedScale's pickled trace)")
    try:  # its size first: the unpickler would read a sparse 100 GB file to its end
        with bounded.open_capped(file, f"{key}={path!r}", bounded.FEDSCALE_PICKLE) as f:
            data = load_plain(f)
    except FedbenchError:
        raise
    except Refused as refused:
        raise FedbenchError(
            f"{key}={path!r}: refused: the file asks to load {refused.name}, and a FedScale "
            "trace holds only dicts, lists, numbers and strings (nothing in it was run)"
        ) from None
    except Exception as exc:  # noqa: BLE001 - any unreadable pickle is the same user problem
        raise FedbenchError(f"{key}={path!r}: not a pickled FedScale trace ({exc})") from None
    if not isinstance(data, Mapping) or not data:
        raise FedbenchError(f"{key}={path!r}: expected a non-empty dict keyed by client id")
    return data


def _clients(data: Mapping[Any, Any], limit: int | None) -> list[Any]:
    ids = sorted(data, key=lambda c: (not str(c).isdigit(), int(c) if str(c).isdigit() else c))
    return ids[:limit] if limit is not None else ids


def capacity_table(data: Mapping[Any, Any], limit: int | None = None) -> dict[str, list[object]]:
    """FedScale capacities as fedbench's capacity columns (module docstring)."""
    ids = _clients(data, limit)
    try:
        compute = np.array([float(data[c]["computation"]) for c in ids])
        kbps = np.array([float(data[c]["communication"]) for c in ids])
    except (KeyError, TypeError, ValueError) as exc:
        raise FedbenchError(
            f"capacity: each client needs 'computation' and 'communication' numbers ({exc!r})"
        ) from None
    if np.any(compute <= 0) or np.any(kbps <= 0):
        raise FedbenchError("capacity: 'computation' and 'communication' must be > 0")
    mbps = kbps / 1000.0
    return {
        "device": list(range(len(ids))),
        "speed": (np.median(compute) / compute).tolist(),
        "down_mbps": mbps.tolist(),
        "up_mbps": mbps.tolist(),
    }


def availability_table(
    data: Mapping[Any, Any], limit: int | None = None, state: str = "charging"
) -> dict[str, list[object]]:
    """FedScale behaviour traces as fedbench's availability rows (module docstring)."""
    rows: dict[str, list[object]] = {k: [] for k in ("device", "start_s", "end_s", "state")}
    rows["period_s"] = []
    for i, c in enumerate(_clients(data, limit)):
        trace = data[c]
        try:
            active = [float(t) for t in trace["active"]]
            inactive = [float(t) for t in trace["inactive"]]
            period = float(trace["finish_time"])
        except (KeyError, TypeError, ValueError) as exc:
            raise FedbenchError(
                f"behave: client {c!r} needs 'active', 'inactive' and 'finish_time' ({exc!r})"
            ) from None
        for start, end in _intervals(active, inactive, period):
            for key, value in zip(
                ("device", "start_s", "end_s", "state", "period_s"),
                (i, start, end, state, period),
                strict=True,
            ):
                rows[key].append(value)
    return rows


def _intervals(
    active: list[float], inactive: list[float], period: float
) -> list[tuple[float, float]]:
    """Each activation to the next deactivation after it (else the period's end), in [0, period]."""
    out = []
    ends = sorted(inactive)
    for start in sorted(active):
        if start >= period:
            break
        end = next((e for e in ends if e > start), period)
        out.append((start, min(end, period)))
    return out


def convert(
    capacity: str | None,
    behave: str | None,
    out: str,
    devices: int | None = None,
    state: str = "charging",
    fmt: str = "csv",
) -> list[Path]:
    if capacity is None and behave is None:
        raise FedbenchError("give capacity=FILE and/or behave=FILE (FedScale's trace pickles)")
    if state not in ("charging", "available"):
        raise FedbenchError(f"state={state!r}: valid: charging, available")
    if fmt not in ("csv", "parquet"):
        raise FedbenchError(f"format={fmt!r}: valid: csv, parquet")
    folder = Path(out)
    written = []
    if capacity is not None:
        table = capacity_table(_load(capacity, "capacity"), devices)
        written.append(write_table(folder / f"capacity.{fmt}", table))
    if behave is not None:
        table = availability_table(_load(behave, "behave"), devices, state)
        written.append(write_table(folder / f"availability.{fmt}", table))
    return written


def run(argv: Sequence[str]) -> str:
    values = GRAMMAR.parse(argv).values
    limit = values.get("devices")
    written = convert(
        values.get("capacity"),
        values.get("behave"),
        values["out"],
        parse_int("devices", limit, 1) if limit is not None else None,
        values.get("state", "charging"),
        values.get("format", "csv"),
    )
    use = ", ".join(f"fleet.population.trace.{p.stem}={p}" for p in written)
    return "\n".join(f"wrote {p}" for p in written) + f"\nuse with: {use}"


if __name__ == "__main__":
    sys.exit(GRAMMAR.main(run, None))
