"""Resident memory beyond what the device keeps resident swaps every step, then is oom."""

from __future__ import annotations

import dataclasses
import math

import pytest

from fedbench.devices.constants import load_constants
from fedbench.devices.emulator import emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.memory import forward_output_bytes, forward_unfold_bytes, resident_mb
from fedbench.devices.profile import DeviceProfile, initial_state, load_profile
from tests.devices.synthetic import synthetic_workload

KNOBS = Knobs()


def _with(profile: DeviceProfile, **memory: float) -> DeviceProfile:
    return dataclasses.replace(profile, memory=dataclasses.replace(profile.memory, **memory))


def test_resident_set_is_runtime_plus_tensors_per_framework() -> None:
    w = synthetic_workload(8)
    consts = load_constants()
    for name in ("mnn", "pytorch"):
        fw = consts.framework(name)
        # A hand-built workload has no call table: nothing beyond the tensors.
        assert forward_unfold_bytes(w) == 0.0 and forward_output_bytes(w) == 0.0
        assert resident_mb(w, fw) == pytest.approx(
            fw.runtime_mb + fw.rss_per_tensor_byte * w.peak_bytes / 2**20
        )
    e = emulate(load_profile("rpi4"), [(w, 1)], initial_state(load_profile("rpi4"), 0.0), KNOBS)
    assert e.rss_mb > e.peak_mem_mb and e.swapped_mb == 0.0 and e.time_s["swap"] == 0.0


def test_mnn_keeps_its_forward_scratch_and_outputs_resident_pytorch_does_not() -> None:
    from fedbench.measure.workload import measure_workload
    from fedbench.models import build_model

    model, _ = build_model("lenet_mnn")
    w = measure_workload(model, (1, 28, 28), 8, model_name="lenet_mnn")
    im2col = forward_unfold_bytes(w)
    # conv1 (1x5x5 patches over 24x24) and conv2 (20x5x5 over 8x8), 8 samples, fp32.
    assert im2col == pytest.approx(8 * 4 * (25 * 24 * 24 + 500 * 8 * 8))
    # Micro-batches: one micro-batch's graph is alive at a time.
    halves = measure_workload(
        model, (1, 28, 28), 8, model_name="lenet_mnn", plan="2x4", microbatches=2
    )
    assert forward_unfold_bytes(halves) == pytest.approx(im2col / 2)
    outputs = forward_output_bytes(w)
    assert forward_output_bytes(halves) == pytest.approx(outputs / 2, rel=0.01)
    # At least every conv, pool and linear output of the 8 samples (fp32) is written.
    written = 20 * 24 * 24 + 20 * 12 * 12 + 50 * 8 * 8 + 50 * 4 * 4 + 400 + 10
    assert outputs >= 8 * 4 * written
    consts = load_constants()
    mnn, torch_fw = consts.framework("mnn"), consts.framework("pytorch")
    assert mnn.rss_per_unfold_byte > 0 and mnn.rss_per_output_byte > 0
    assert torch_fw.rss_per_unfold_byte == 0 and torch_fw.rss_per_output_byte == 0
    kept = mnn.rss_per_unfold_byte * im2col + mnn.rss_per_output_byte * outputs
    assert resident_mb(w, mnn) == pytest.approx(
        mnn.runtime_mb + (mnn.rss_per_tensor_byte * w.peak_bytes + kept) / 2**20
    )
    assert resident_mb(w, torch_fw) == pytest.approx(
        torch_fw.runtime_mb + torch_fw.rss_per_tensor_byte * w.peak_bytes / 2**20
    )


def test_a_working_set_beyond_ram_swaps_then_cannot_run() -> None:
    """The MNN SqueezeNet batch-32 run: 4.3 GB resident on a 6 GB phone ran 5.6x slower."""
    p = load_profile("meizu_16t")
    w = synthetic_workload(16)  # a few hundred MB resident
    fits = emulate(p, [(w, 1)], initial_state(p, 0.0), KNOBS)
    rss = fits.rss_mb
    squeezed = _with(p, available_mb=int(rss * 0.6), swap_mb=int(rss))
    swapping = emulate(squeezed, [(w, 1)], initial_state(p, 0.0), KNOBS)
    assert swapping.status == "ok"
    assert swapping.swapped_mb == pytest.approx(rss - int(rss * 0.6))
    assert swapping.time_s["swap"] > 0
    assert swapping.latency_s > fits.latency_s + swapping.time_s["swap"] * 0.99
    slower_disk = emulate(_with(squeezed, swap_gbs=0.1), [(w, 1)], initial_state(p, 0.0), KNOBS)
    assert slower_disk.time_s["swap"] == pytest.approx(10 * swapping.time_s["swap"])
    no_room = emulate(
        _with(p, available_mb=int(rss * 0.6), swap_mb=16), [(w, 1)], initial_state(p, 0.0), KNOBS
    )
    assert no_room.status == "oom" and "resident set" in no_room.reason
    assert math.isnan(no_room.latency_s)


def test_available_memory_cannot_exceed_ram() -> None:
    import yaml

    from fedbench.devices.profile import parse_profile
    from fedbench.errors import FedbenchError
    from fedbench.paths import profiles_dir

    data = yaml.safe_load((profiles_dir() / "rpi4.yaml").read_text())
    data["memory"]["available_mb"] = data["memory"]["total_mb"] + 1
    with pytest.raises(FedbenchError, match="memory.available_mb"):
        parse_profile(data, "rpi4.yaml", expected_name="rpi4")


def test_a_graph_executor_pays_per_step_for_the_memory_it_allocates_afresh() -> None:
    """MNN builds a new graph every step: its time per sample grows with the batch
    (the Meizu SqueezeNet sweep: 150 ms at batch 1, 2.8 s at batch 16)."""
    from fedbench.devices.memory import fault_seconds
    from fedbench.measure.workload import measure_workload
    from fedbench.models import build_model

    model, _ = build_model("lenet_mnn")
    small, big = (measure_workload(model, (1, 28, 28), b, model_name="lenet_mnn") for b in (4, 32))
    consts = load_constants()
    mnn, torch_fw = consts.framework("mnn"), consts.framework("pytorch")
    fresh_kb = (resident_mb(big, mnn) - mnn.runtime_mb) * 1024
    big_rss, small_rss = resident_mb(big, mnn), resident_mb(small, mnn)
    assert fault_seconds(big_rss, mnn, 2.0) == pytest.approx(
        fresh_kb * mnn.fault_cycles_per_kb / 2e9
    )
    assert fault_seconds(big_rss, mnn, 2.0) > fault_seconds(small_rss, mnn, 2.0) > 0
    # Not identified for PyTorch: left out.
    assert fault_seconds(resident_mb(big, torch_fw), torch_fw, 2.0) == 0.0
    p = load_profile("meizu_16t")
    e = emulate(p, [(big, 1)], initial_state(p, 0.0), KNOBS)
    assert e.time_s["fault"] > 0 and sum(e.time_s.values()) == pytest.approx(e.latency_s)
