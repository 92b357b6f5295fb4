"""Device profiles: every shipped profile loads; broken ones are refused naming file and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fedbench.devices.profile import load_profile, profile_names
from fedbench.errors import FedbenchError
from fedbench.paths import profiles_dir

REQUIRED = {
    "meizu_16t",
    "xiaomi_mi9",
    "samsung_s8plus",
    "samsung_note10",
    "pixel2",
    "redmi_note9pro",
    "huawei_mate30",
    "honor8",
    "rpi3bplus",
    "rpi4",
    "rpi5",
    "jetson_nano",
    "jetson_tx2",
    "jetson_xavier_nx",
}


def test_required_profiles_exist() -> None:
    assert set(profile_names()) >= REQUIRED


@pytest.mark.parametrize("name", profile_names())
def test_profile_loads_and_is_consistent(name: str) -> None:
    p = load_profile(name)
    assert p.name == name
    assert p.memory.train_budget_mb < p.memory.total_mb
    assert p.framework.threads <= p.total_cores
    assert all(c.dvfs_ghz[-1] == c.max_freq_ghz for c in p.clusters)
    assert (p.battery.capacity_wh is not None) == (p.kind == "phone")


def _write(tmp_path: Path, edit: Any, name: str = "meizu_16t") -> Path:
    data = yaml.safe_load((profiles_dir() / f"{name}.yaml").read_text())
    edit(data)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _refused(path: Path) -> str:
    with pytest.raises(FedbenchError) as info:
        load_profile(path)
    message = str(info.value)
    assert str(path) in message
    return message


def test_typo_names_file_key_and_suggests(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["clusters"]["gold"]["max_freq_gz"] = d["clusters"]["gold"].pop("max_freq_ghz")

    message = _refused(_write(tmp_path, edit))
    assert "clusters.gold.max_freq_gz" in message
    assert "did you mean 'max_freq_ghz'" in message


def test_missing_field_is_named(tmp_path: Path) -> None:
    message = _refused(_write(tmp_path, lambda d: d["memory"].pop("bandwidth_gbs")))
    assert "memory.bandwidth_gbs" in message and "missing" in message


def test_wrong_type_is_named(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["clusters"]["silver"]["cores"] = "four"

    message = _refused(_write(tmp_path, edit))
    assert "clusters.silver.cores" in message and "expected an integer" in message


def test_mhz_where_ghz_expected_is_refused(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["clusters"]["prime"]["max_freq_ghz"] = 2841.6

    message = _refused(_write(tmp_path, edit))
    assert "clusters.prime.max_freq_ghz" in message
    assert "GHz" in message and "1000x too large" in message


def test_out_of_range_list_item_is_named(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["clusters"]["silver"]["dvfs_ghz"][0] = 300

    message = _refused(_write(tmp_path, edit))
    assert "clusters.silver.dvfs_ghz.0" in message


def test_uncited_number_is_refused(tmp_path: Path) -> None:
    message = _refused(_write(tmp_path, lambda d: d["sources"].pop("memory.bandwidth_gbs")))
    assert "sources.memory.bandwidth_gbs" in message and "source" in message


def test_source_for_unknown_field_is_refused(tmp_path: Path) -> None:
    def edit(d: dict[str, Any]) -> None:
        d["sources"]["memory.bandwith_gbs"] = "typo"

    message = _refused(_write(tmp_path, edit))
    assert "did you mean 'memory.bandwidth_gbs'" in message


def test_unknown_arch_and_inconsistent_max_clock(tmp_path: Path) -> None:
    def arch(d: dict[str, Any]) -> None:
        d["clusters"]["gold"]["arch"] = "a77"

    assert "clusters.gold.arch" in _refused(_write(tmp_path, arch))

    def clock(d: dict[str, Any]) -> None:
        d["clusters"]["gold"]["max_freq_ghz"] = 2.5

    assert "top DVFS step" in _refused(_write(tmp_path, clock))


def test_unknown_conv_backend_is_refused_with_the_choices(tmp_path: Path) -> None:
    def backend(d: dict[str, Any]) -> None:
        d["framework"]["conv_backend"] = "mkl"

    message = _refused(_write(tmp_path, backend))
    assert "framework.conv_backend" in message and "nnpack" in message and "onednn" in message


def test_unknown_profile_name_lists_choices() -> None:
    with pytest.raises(FedbenchError, match="did you mean 'rpi4'.*valid: .*jetson_tx2"):
        load_profile("rpi_4")
