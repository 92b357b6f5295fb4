"""Each probe source against recorded sysfs trees (fixtures/README.md)."""

from __future__ import annotations

import shutil
import sys
import types
from pathlib import Path

import pytest

from fedbench.measure.probe import default_sources
from fedbench.measure.probe.battery import (
    BatteryLevelSource,
    BatteryReading,
    BatterySource,
    discharge_power_w,
)
from fedbench.measure.probe.cpu import (
    CpuFreqSource,
    ProcStatSource,
    parse_proc_stat,
    utilisation,
)
from fedbench.measure.probe.ina3221 import Ina3221HwmonSource, Ina3221IioSource, rails_total_w
from fedbench.measure.probe.memory import (
    ProcessMemorySource,
    SystemMemorySource,
    parse_kb_fields,
)
from fedbench.measure.probe.nvml import NvmlSource
from fedbench.measure.probe.rapl import RaplSource, counter_delta, find_zones
from fedbench.measure.probe.source import COMPONENT, DEVICE
from fedbench.measure.probe.thermal import HwmonTempSource, ThermalZoneSource, millidegrees_to_c

FIXTURES = Path(__file__).parent / "fixtures"


def copy_tree(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- RAPL -------------------------------------------------------------------


def test_counter_delta_handles_wraparound() -> None:
    assert counter_delta(1_000, 4_000, 10_000) == 3_000
    assert counter_delta(9_000, 500, 10_000) == 1_500


def test_rapl_total_zones_server_and_laptop() -> None:
    server = {z.channel: z.in_total for z in find_zones(FIXTURES / "rapl_server")}
    # Packages and their DRAM add up; nothing else is there.
    assert server == {
        "intel-rapl:0:package-0": True,
        "intel-rapl:0:0:dram": True,
        "intel-rapl:1:package-1": True,
        "intel-rapl:1:0:dram": True,
    }
    laptop = {z.channel: z.in_total for z in find_zones(FIXTURES / "laptop")}
    # psys contains the package; the mmio duplicate is not a RAPL zone.
    assert laptop == {
        "intel-rapl:0:package-0": False,
        "intel-rapl:0:0:core": False,
        "intel-rapl:0:1:uncore": False,
        "intel-rapl:1:psys": True,
    }


def test_rapl_power_and_energy_across_a_wrap(tmp_path: Path) -> None:
    root = copy_tree("rapl_server", tmp_path)
    zones = root / "sys/class/powercap"
    clock = FakeClock()
    source = RaplSource(root, clock=clock)
    assert source.available() and source.scope == COMPONENT
    source.start()
    assert source.read() is None  # first read is the baseline
    assert source.energy_j() == 0.0
    # 0.5 s later: package-0 +20 J, dram +2 J each, package-1 wraps after +30 J.
    (zones / "intel-rapl:0/energy_uj").write_text(f"{12004300118 + 20_000_000}\n")
    (zones / "intel-rapl:0:0/energy_uj").write_text(f"{4052112007 + 2_000_000}\n")
    (zones / "intel-rapl:1:0/energy_uj").write_text(f"{3984550210 + 2_000_000}\n")
    wrapped = 262143100000 + 30_000_000 - 262143328850
    (zones / "intel-rapl:1/energy_uj").write_text(f"{wrapped}\n")
    clock.now += 0.5
    total = source.read()
    assert total == pytest.approx((20 + 2 + 2 + 30) / 0.5)
    assert source.channels()["intel-rapl:1:package-1"] == pytest.approx(60.0)
    assert source.energy_j() == pytest.approx(54.0)


def test_rapl_waits_for_a_long_enough_delta(tmp_path: Path) -> None:
    root = copy_tree("rapl_server", tmp_path)
    clock = FakeClock()
    source = RaplSource(root, clock=clock)
    source.start()
    source.read()
    path = root / "sys/class/powercap/intel-rapl:0/energy_uj"
    path.write_text(f"{12004300118 + 1_000}\n")
    clock.now += 0.0005
    assert source.read() is None  # too short for a power figure...
    assert source.energy_j() == pytest.approx(0.001)  # ...but the energy counts
    clock.now += 0.0095
    assert source.read() == pytest.approx(0.001 / 0.01)


def test_rapl_unreadable_counter_is_absent(tmp_path: Path) -> None:
    root = copy_tree("rapl_server", tmp_path)
    for zone in (root / "sys/class/powercap").iterdir():
        (zone / "energy_uj").unlink()  # as a non-root user sees it: no readable counter
    assert not RaplSource(root).available()


# -- Jetson INA3221 ---------------------------------------------------------


def test_tx2_iio_rails_and_input_total() -> None:
    source = Ina3221IioSource(FIXTURES / "jetson_tx2")
    assert source.available()
    assert source.scope == DEVICE  # VDD_IN is the module input
    total = source.read()
    rails = source.channels()
    assert set(rails) == {
        "VDD_SYS_GPU", "VDD_SYS_SOC", "VDD_4V0_WIFI", "VDD_IN", "VDD_SYS_CPU", "VDD_SYS_DDR",
    }  # fmt: skip
    assert rails["VDD_SYS_CPU"] == pytest.approx(3.363)
    assert rails["VDD_SYS_GPU"] == pytest.approx(0.229)
    assert total == pytest.approx(7.466)  # the input rail, not the sum of all rails


def test_iio_falls_back_to_current_times_voltage(tmp_path: Path) -> None:
    root = copy_tree("jetson_tx2", tmp_path)
    (root / "sys/bus/i2c/drivers/ina3221x/0-0041/iio:device1/in_power0_input").unlink()
    source = Ina3221IioSource(root)
    source.read()
    assert source.channels()["VDD_IN"] == pytest.approx(0.390 * 19.144)


def test_orin_hwmon_rails_skip_shunt_and_sum_channels() -> None:
    source = Ina3221HwmonSource(FIXTURES / "jetson_orin")
    assert source.available() and source.scope == DEVICE
    total = source.read()
    assert source.channels() == pytest.approx(
        {"VDD_IN": 5.072 * 1.496, "VDD_CPU_GPU_CV": 5.064 * 0.424, "VDD_SOC": 5.064 * 0.512}
    )
    assert total == pytest.approx(5.072 * 1.496)


def test_hwmon_without_input_rail_sums_and_skips_disabled(tmp_path: Path) -> None:
    root = copy_tree("jetson_orin", tmp_path)
    chip = root / "sys/class/hwmon/hwmon1"
    (chip / "in1_label").write_text("VDD_GPU_SOC\n")
    (chip / "in3_enable").write_text("0\n")
    source = Ina3221HwmonSource(root)
    assert source.scope == COMPONENT
    assert source.read() == pytest.approx(5.072 * 1.496 + 5.064 * 0.424)
    assert set(source.channels()) == {"VDD_GPU_SOC", "VDD_CPU_GPU_CV"}


def test_rails_total_prefers_nano_input_rail() -> None:
    assert rails_total_w({"POM_5V_IN": 4.0, "POM_5V_CPU": 1.5, "POM_5V_GPU": 0.5}) == 4.0
    assert rails_total_w({"GPU": 1.0, "CPU": 2.0}) == 3.0
    assert rails_total_w({}) is None


# -- battery ------------------------------------------------------------------


def test_android_battery_negative_current_is_discharge() -> None:
    root = FIXTURES / "android_phone"
    source = BatterySource(root)
    assert source.available() and source.scope == DEVICE
    assert source.read() == pytest.approx(0.512 * 3.987)  # |-512000 uA| x 3.987 V
    assert set(source.channels()) == {"battery"}  # not usb, not bms
    assert BatteryLevelSource(root).read() == 76


def test_laptop_battery_power_now_and_device_scope_batteries() -> None:
    source = BatterySource(FIXTURES / "laptop")
    assert source.read() == pytest.approx(8.512)
    assert set(source.channels()) == {"BAT0"}  # the mouse battery is not the laptop's
    assert BatteryLevelSource(FIXTURES / "laptop").read() == 64


@pytest.mark.parametrize("status", ["Charging", "Full", "Not charging", "Unknown"])
def test_battery_not_discharging_has_no_reading(tmp_path: Path, status: str) -> None:
    root = copy_tree("android_phone", tmp_path)
    (root / "sys/class/power_supply/battery/status").write_text(status + "\n")
    (root / "sys/class/power_supply/battery/current_now").write_text("1200000\n")
    source = BatterySource(root)
    assert source.available()  # it is a power source, just not now
    assert source.read() is None


def test_discharge_power_sign_conventions() -> None:
    positive = BatteryReading("Discharging", None, 500_000, 4_000_000, 50)
    negative = BatteryReading("Discharging", None, -500_000, 4_000_000, 50)
    assert discharge_power_w(positive) == discharge_power_w(negative) == pytest.approx(2.0)
    assert discharge_power_w(BatteryReading("Discharging", -3_000_000, None, None, 50)) == 3.0
    assert discharge_power_w(BatteryReading("Discharging", None, None, 4_000_000, 50)) is None


# -- thermal ----------------------------------------------------------------


def test_tx2_thermal_zones_ignore_pmic_placeholder() -> None:
    source = ThermalZoneSource(FIXTURES / "jetson_tx2")
    assert source.read() == pytest.approx(47.5)  # BCPU, not PMIC-Die's constant 100
    assert "thermal_zone0:BCPU-therm" in source.channels()
    assert not any("PMIC" in c for c in source.channels())


def test_implausible_and_non_millidegree_zones_are_dropped() -> None:
    orin = ThermalZoneSource(FIXTURES / "jetson_orin")
    orin.read()
    assert not any("cv" in c for c in orin.channels())  # disabled sensors at -256 C
    phone = ThermalZoneSource(FIXTURES / "android_phone")
    assert phone.read() == pytest.approx(47.9)
    assert "thermal_zone5:tsens_tz_sensor12" not in phone.channels()  # "43": units unknown
    assert millidegrees_to_c(43) is None
    assert millidegrees_to_c(-5000) == -5.0


def test_hwmon_temperatures_with_labels() -> None:
    laptop = HwmonTempSource(FIXTURES / "laptop")
    assert laptop.read() == pytest.approx(63.0)
    assert laptop.channels() == {
        "hwmon4:coretemp:Package id 0": 63.0,
        "hwmon4:coretemp:Core 0": 61.0,
    }
    orin = HwmonTempSource(FIXTURES / "jetson_orin")
    orin.read()
    assert orin.channels() == {"hwmon2:nvme:Composite": 38.85, "hwmon2:nvme:temp2": 41.85}


# -- CPU and memory ---------------------------------------------------------


def test_proc_stat_parsing_and_utilisation() -> None:
    text = (FIXTURES / "jetson_tx2/proc/stat").read_text()
    cores = parse_proc_stat(text)
    assert sorted(cores) == [f"cpu{i}" for i in range(6)]
    busy, total = cores["cpu0"]
    assert busy == 226121 + 410 + 52911 + 0 + 5919 + 0
    assert total == busy + 1524163 + 1167
    later = {"cpu0": (busy + 30, total + 40), "cpu1": (cores["cpu1"][0], cores["cpu1"][1])}
    assert utilisation(cores, later) == {"cpu0": 0.75}  # cpu1 saw no ticks: no figure


def test_cpu_sources_on_tx2_tree() -> None:
    root = FIXTURES / "jetson_tx2"
    util = ProcStatSource(root)
    assert util.available()
    assert util.read() is None  # a delta needs two reads
    assert util.channels()["busy:cpu0"] == 226121 + 410 + 52911 + 5919
    freq = CpuFreqSource(root)
    assert freq.available()
    assert freq.read() == pytest.approx((4 * 2.0352 + 2 * 1.4208) / 6)
    assert freq.static()["max:cpu1"] == pytest.approx(2.0352)


def test_memory_sources_on_tx2_tree() -> None:
    root = FIXTURES / "jetson_tx2"
    fields = parse_kb_fields((root / "proc/self/status").read_text())
    assert fields["VmHWM"] == pytest.approx(612804 / 1024)
    process = ProcessMemorySource(root)
    process.start()  # no clear_refs in the tree: nothing is written
    assert not (root / "proc/self/clear_refs").exists()
    assert process.read() == pytest.approx(598340 / 1024)
    assert process.channels() == {"hwm": pytest.approx(612804 / 1024)}
    assert SystemMemorySource(root).read() == pytest.approx(6273860 / 1024)


# -- NVML and absence ---------------------------------------------------------


def test_nvml_absent_without_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert not NvmlSource(Path("/")).available()


def test_nvml_reads_power_and_energy_through_the_bindings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = {"energy": [1_000_000, 2_000_000]}
    fake = types.ModuleType("pynvml")
    fake.nvmlInit = lambda: None  # type: ignore[attr-defined]
    fake.nvmlShutdown = lambda: None  # type: ignore[attr-defined]
    fake.nvmlDeviceGetCount = lambda: 2  # type: ignore[attr-defined]
    fake.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    fake.nvmlDeviceGetPowerUsage = lambda h: [45_000, 30_500][h]  # type: ignore[attr-defined]
    fake.nvmlDeviceGetTotalEnergyConsumption = lambda h: state["energy"][h]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    source = NvmlSource(Path("/"))
    assert source.available() and source.scope == COMPONENT
    source.start()
    state["energy"] = [1_004_000, 2_003_000]
    assert source.read() == pytest.approx(75.5)
    assert source.channels() == {"gpu0": 45.0, "gpu1": 30.5}
    assert source.energy_j() == pytest.approx(7.0)
    # A fixture root never reaches the real driver.
    assert not NvmlSource(FIXTURES / "laptop").available()


def test_every_source_absent_on_an_empty_tree(tmp_path: Path) -> None:
    assert [s.name for s in default_sources(tmp_path) if s.available()] == []


@pytest.mark.parametrize(
    ("tree", "present"),
    [
        (
            "jetson_tx2",
            {"cpu_util", "cpu_freq", "process_mem", "mem_available", "thermal", "ina3221"},
        ),
        ("jetson_orin", {"thermal", "hwmon_temp", "ina3221_hwmon"}),
        ("android_phone", {"thermal", "battery", "battery_level"}),
        ("laptop", {"thermal", "hwmon_temp", "battery", "battery_level", "rapl"}),
        ("rapl_server", {"rapl"}),
    ],
)
def test_sources_present_per_tree(tree: str, present: set[str]) -> None:
    found = {s.name for s in default_sources(FIXTURES / tree) if s.available()}
    assert found == present
