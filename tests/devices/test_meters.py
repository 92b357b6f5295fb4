"""The meter owns the device kind: decided at expansion, answered by the meter, asked nowhere
else."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import pytest

from fedbench.core.device import DeviceSpec, Traits
from fedbench.core.meter import Caps, TrainJob
from fedbench.devices.budget import budget_at
from fedbench.devices.emulated_meter import EmulatedMeter, VariedMeter
from fedbench.devices.meter import HostMeter
from fedbench.devices.meters import make_meter, profile_of
from fedbench.devices.probe_meter import ProbeMeter
from fedbench.errors import FedbenchError
from fedbench.experiment.fleet import expand_fleet
from fedbench.models import build_model
from tests.devices.test_budget import _profile

ROOT = Path(__file__).resolve().parents[2]
FLEET = {"devices": [{"profile": "rpi4", "count": 2}, {"profile": "host", "count": 1}]}


def _fleet() -> tuple[DeviceSpec, ...]:
    return expand_fleet({"devices": [*FLEET["devices"], {"profile": "physical", "count": 1}]})


def _job(now_s: float = 0.0) -> TrainJob:
    return TrainJob("lenet", (1, 28, 28), (16, 16), 250_000, now_s, None)


def test_the_kind_is_decided_when_the_fleet_is_expanded() -> None:
    assert [(d.profile, d.kind) for d in _fleet()] == [
        ("rpi4", "emulated"),
        ("rpi4", "emulated"),
        ("host", "host"),
        ("physical", "physical"),
    ]


def test_make_meter_builds_the_kinds_meter_whole() -> None:
    rpi, _, host, phone = _fleet()
    emulated = make_meter(rpi, {"cores": 2}, "adam")
    assert isinstance(emulated, EmulatedMeter) and emulated.kind == "emulated"
    assert emulated.optimizer == "adam" and emulated.knobs.cores == 2
    assert isinstance(make_meter(host), HostMeter) and make_meter(host).kind == "host"
    assert isinstance(make_meter(phone), ProbeMeter) and make_meter(phone).kind == "physical"
    assert [make_meter(d).remote for d in (rpi, host, phone)] == [False, False, True]
    assert make_meter(rpi, {"cores": 2}, "adam") is emulated  # one per profile, knobs, optimizer
    assert profile_of(rpi) is not None and profile_of(host) is None and profile_of(phone) is None
    with pytest.raises(FedbenchError, match="fleet.knobs"):
        make_meter(rpi, {"cpus": 2})


def test_only_an_emulated_meter_predicts_caps_and_bounds() -> None:
    rpi, _, host, phone = _fleet()
    model, _ = build_model("lenet")
    for meter in (make_meter(host), make_meter(phone)):
        assert meter.predict(model, _job()) is None
        assert meter.caps(0.0) is None and meter.ceilings() is None
        assert meter.varied(Traits(0.5, 10, 10, 50, math.nan, False)) is meter
    meter = make_meter(rpi)
    predicted = meter.predict(model, _job())
    assert predicted is not None and predicted.status == "ok" and predicted.plan == "bs16"
    assert predicted.latency_s > 0 and predicted.comm_s > 0
    assert meter.caps(None) == Caps(4, 3400) == meter.caps(0.0)  # rpi4: 4 threads, 3400 MB
    assert make_meter(rpi, {"cores": 2}).caps(0.0) == Caps(2, 3400)
    ceilings = meter.ceilings()
    assert ceilings is not None
    assert (ceilings.memory_mb, ceilings.freq_ghz) == (4096.0, 1.8)  # the C0 board's top clock
    assert ceilings.power_w == pytest.approx(2.7 + 4 * 0.75 + 0.3 + 0.08 * 12.8)


def test_caps_follow_the_memory_pressure_of_the_hour() -> None:
    meter = EmulatedMeter(_profile(16, [[0, 24, 0.25]]), make_meter(_fleet()[0]).knobs)
    threads = meter.profile.framework.threads
    assert meter.caps(3600.0) == Caps(threads, budget_at(meter.profile, 3600.0))
    assert meter.caps(3600.0).memory_mb == 4.0 and meter.caps(None).memory_mb == 16


def test_varied_applies_the_draw_inside_the_meter() -> None:
    rpi = _fleet()[0]
    model, _ = build_model("lenet")
    base = make_meter(rpi)
    slow = base.varied(Traits(0.5, 20.0, 5.0, 40.0, math.nan, False))
    assert isinstance(slow, VariedMeter) and slow.kind == "emulated"
    mine, theirs = slow.predict(model, _job()), base.predict(model, _job())
    assert theirs is not None
    assert mine.latency_s == pytest.approx(theirs.latency_s / 0.5)
    assert mine.energy_j == pytest.approx(theirs.energy_j / 0.5)
    bits = 8.0 * 250_000
    assert mine.comm_s == pytest.approx(bits / 20e6 + bits / 5e6 + 0.08)
    again = slow.varied(Traits(1.0, 20.0, 5.0, 40.0, math.nan, False))
    assert again.predict(model, _job()).latency_s == pytest.approx(theirs.latency_s)


# A comparison of a kind or a profile name with a kind, or an isinstance test on
# a meter class, is a branch on the device kind: only these modules may hold one.
KIND_OWNERS = {"fedbench/core/device.py", "fedbench/devices/meters.py"}
KIND_NAMES = {"HOST", "PHYSICAL", "EMULATED", "PROFILELESS"}
KIND_TEXTS = {"host", "physical", "emulated"}
METERS = {"EmulatedMeter", "VariedMeter", "ProbeMeter", "HostMeter"}


def _branches_on_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance":
        kinds = node.args[1] if len(node.args) > 1 else None
        names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        return any(getattr(n, "id", getattr(n, "attr", "")) in METERS for n in names)
    if isinstance(node, ast.Compare):
        sides = [node.left, *node.comparators]
        flat = [e for s in sides for e in (s.elts if isinstance(s, ast.Tuple) else [s])]
        if any(isinstance(s, ast.Name) and s.id in KIND_NAMES for s in flat):
            return True
        about = any(isinstance(s, ast.Attribute) and s.attr in ("kind", "profile") for s in sides)
        return about and any(isinstance(s, ast.Constant) and s.value in KIND_TEXTS for s in flat)
    return False


def test_no_other_module_branches_on_the_device_kind() -> None:
    found = []
    for path in sorted([*ROOT.glob("fedbench/**/*.py"), *ROOT.glob("strategies/*.py")]):
        rel = str(path.relative_to(ROOT))
        if rel in KIND_OWNERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if _branches_on_kind(node):
                found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "ask the device's meter instead:\n" + "\n".join(found)
