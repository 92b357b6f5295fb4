from __future__ import annotations

import math

import pytest
from flwr.app import ConfigRecord

from fedbench.core.records import CSV_FIELDS, RoundReport, from_record, to_record, to_row
from fedbench.errors import FedbenchError


def _report(**kw: object) -> RoundReport:
    base = dict(
        round=3,
        day=2,
        node=17,
        device="rpi4-000",
        profile="rpi4",
        kind="emulated",
        status="ok",
        num_examples=64,
        train_loss=0.5,
        latency_s=1.25,
        plan="bs16",
    )
    base.update(kw)
    return RoundReport(**base)  # type: ignore[arg-type]


def test_round_trip_through_flower_record() -> None:
    report = _report(energy_j=3.5)
    back = from_record(to_record(report))
    assert back == RoundReport(**{**report.__dict__, "avg_power_w": back.avg_power_w})
    assert math.isnan(back.avg_power_w)


def test_record_keys_are_kebab_and_rows_snake() -> None:
    record = to_record(_report())
    assert "peak-mem-mb" in record and "peak_mem_mb" not in record
    row = to_row(_report())
    assert list(row) == list(CSV_FIELDS)
    assert row["energy_j"] == ""  # NaN is an empty cell, never 0


def test_server_trusts_transport_node_id() -> None:
    assert from_record(to_record(_report(node=1)), node=99).node == 99


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("status", "exploded", "status 'exploded' is not one of"),
        ("num-examples", "64", "'num-examples' is str, expected int"),
        ("latency-s", "fast", "'latency-s' is str, expected float"),
    ],
)
def test_malformed_reply_is_named(key: str, value: object, match: str) -> None:
    record = to_record(_report())
    record[key] = value  # type: ignore[assignment]
    with pytest.raises(FedbenchError, match=match):
        from_record(record)


def test_missing_key_is_named() -> None:
    record = ConfigRecord({k: v for k, v in to_record(_report()).items() if k != "energy-j"})
    with pytest.raises(FedbenchError, match="no key 'energy-j'"):
        from_record(record)
