"""`python -m fedbench.bench`: one JSON object per device, a table for several, clean errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fedbench.bench import main, run
from fedbench.devices.profile import profile_names


def test_one_device_prints_a_traceable_json_object() -> None:
    out = json.loads(run(["device=meizu_16t", "model=lenet", "batch_size=8"]))
    assert out["status"] == "ok" and out["device"] == "meizu_16t"
    for key in ("latency_s", "energy_j", "avg_power_w", "peak_mem_mb"):
        assert out[key] > 0
    breakdown = out["breakdown"]
    assert set(breakdown["time_s"]) >= {
        "dense",
        "depthwise",
        "elementwise",
        "movement",
        "optimizer",
    }
    assert sum(breakdown["time_s"].values()) == pytest.approx(out["latency_s"])
    assert sum(breakdown["energy_j"].values()) == pytest.approx(out["energy_j"])
    assert sum(breakdown["memory_mb"].values()) == pytest.approx(out["peak_mem_mb"])
    resident = breakdown["resident_mb"]
    assert sum(resident.values()) == pytest.approx(out["rss_mb"])
    assert resident["tensors"] == pytest.approx(out["peak_mem_mb"])
    # The Meizu trains with MNN, whose graph keeps the forward im2col buffers and outputs.
    assert resident["kept_im2col"] > 0 and resident["kept_outputs"] > 0
    assert out == json.loads(run(["device=meizu_16t", "model=lenet", "batch_size=8"]))


def test_plan_auto_keeps_an_mnn_phones_resident_set_in_ram() -> None:
    # DenseNet40's full batch of 16 fits the Pixel 2's tensor budget, but MNN's
    # graph (im2col per weight gradient, every forward output) does not fit its RAM.
    full = json.loads(run(["device=pixel2", "model=densenet40", "batch_size=16"]))
    assert full["peak_mem_mb"] <= full["mem_budget_mb"]
    assert full["rss_mb"] > full["resident_limit_mb"]
    auto = json.loads(run(["device=pixel2", "model=densenet40", "batch_size=16", "plan=auto"]))
    assert auto["status"] == "ok" and auto["plan"] != full["plan"]
    assert auto["rss_mb"] <= auto["resident_limit_mb"] and auto["swapped_mb"] == 0


def test_resident_set_breakdown_of_a_pytorch_device_keeps_no_scratch() -> None:
    out = json.loads(run(["device=rpi4", "model=lenet", "batch_size=8"]))
    resident = out["breakdown"]["resident_mb"]
    assert resident["kept_im2col"] == 0 and resident["kept_outputs"] == 0
    assert sum(resident.values()) == pytest.approx(out["rss_mb"])


def test_knobs_input_and_steps() -> None:
    base = json.loads(
        run(["device=meizu_16t", "model=mobilenetv2", "batch_size=2", "input=3x64x64"])
    )
    assert base["input"] == "3x64x64"
    slow = json.loads(
        run(
            [
                "device=meizu_16t",
                "model=mobilenetv2",
                "batch_size=2",
                "input=3x64x64",
                "cores=1",
                "clusters=silver",
                "freq_ghz=0.6",
                "background=true",
            ]
        )
    )
    assert slow["latency_s"] > 5 * base["latency_s"]
    assert slow["knobs"] == {
        "cores": 1,
        "clusters": ["silver"],
        "freq_ghz": 0.6,
        "background": True,
    }
    hot = json.loads(run(["device=rpi4", "model=mobilenetv2", "batch_size=4", "steps=400"]))
    temps = [point["temp_c"] for point in hot["trace"]]
    # Heats towards the 80 C trip, then cycles around it as the clock steps down.
    assert temps[:3] == sorted(temps[:3]) and max(temps) >= 78.0 and hot["throttled_frac"] > 0
    assert max(p["step_latency_s"] for p in hot["trace"]) > hot["trace"][0]["step_latency_s"]


def test_several_devices_print_a_table() -> None:
    table = run(["device=all", "model=lenet", "batch_size=4"]).splitlines()
    assert table[0].split()[:3] == ["device", "status", "step_latency_s"]
    assert sorted(line.split()[0] for line in table[1:]) == profile_names()
    two = run(["device=rpi4,rpi5", "model=lenet", "batch_size=4"]).splitlines()
    assert len(two) == 3


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["device=rpi_4", "model=lenet", "batch_size=4"], "did you mean 'rpi4'"),
        (["device=rpi4", "model=lenet5", "batch_size=4"], "valid: "),
        (["device=rpi4", "model=lenet"], "missing batch_size"),
        (["device=rpi4", "model=lenet", "batch_size=zero"], "positive integer"),
        (["device=rpi4", "model=lenet", "batch_size=4", "core=2"], "did you mean 'cores'"),
        (["device=rpi4", "model=lenet", "batch_size=4", "freq_ghz=1500"], "not MHz"),
        (["device=rpi4", "model=lenet", "batch_size=4", "clusters=big"], "valid: a72"),
        (["rpi4"], "expected key=value"),
        (["device=rpi4", "model=lenet", "batch_size=4", "input=1x32x32"], "does not fit model"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fedbench.bench: error: ") and expected in err and "\n" not in err


def test_module_entry_point_has_no_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "fedbench.bench", "device=nope", "model=lenet", "batch_size=1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "valid: all, honor8" in proc.stderr
