"""The per-call cost model: each mechanism of fedbench.devices.kernels, one at a time."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedbench.devices.constants import load_constants
from fedbench.devices.kernels import (
    BACKWARD,
    FORWARD,
    KIND,
    OPTIMIZER,
    CallTable,
    CpuRig,
    GpuRig,
    by_class,
    cpu_call_seconds,
    gpu_call_seconds,
)

CONSTS = load_constants()
FW = CONSTS.framework("pytorch")
SHARED = CONSTS.fitted.shared
RIG = CpuRig(threads=4.0, core_gflops=20.0, main_ghz=2.0, dram_gbs=10.0, cache_bytes=2**21)


def table(
    kind: str = "conv1x1",
    phase: int = FORWARD,
    flops: float = 1e9,
    nbytes: float = 1e6,
    narrow: float = 256.0,
    outputs: float = 1e6,
    unfold: float = 0.0,
    weights: float = 0.0,
) -> CallTable:
    one = lambda v: np.array([v], dtype=float)  # noqa: E731
    return CallTable(
        np.array([phase]),
        np.array([KIND[kind]]),
        one(flops),
        one(nbytes),
        one(narrow),
        one(outputs),
        one(unfold),
        one(weights),
    )


def seconds(t: CallTable, rig: CpuRig = RIG, fw=FW) -> float:  # type: ignore[no-untyped-def]
    return float(cpu_call_seconds(t, rig, fw, SHARED).total.sum())


def test_a_thin_gemm_runs_below_peak() -> None:
    """A batch-1 linear layer is a matrix-vector product: same FLOPs, far slower."""
    wide, thin = seconds(table(narrow=512)), seconds(table(narrow=1))
    assert thin > 3 * wide


def test_a_small_output_does_not_split_across_cores() -> None:
    """A weight gradient with a small output parallelises like its output, not its FLOPs."""
    big, small = seconds(table(outputs=1e7)), seconds(table(outputs=1e2))
    one_thread = seconds(table(outputs=1e7), dataclasses.replace(RIG, threads=1.0))
    assert small == pytest.approx(one_thread, rel=0.05)
    assert big < 0.5 * small


def test_operands_beyond_the_cache_stream_from_dram() -> None:
    """Elementwise work grows faster than its bytes once the operands outgrow the LLC."""
    small = seconds(table("elementwise", flops=1e4, nbytes=2**20, outputs=1e9))
    large = seconds(table("elementwise", flops=1e4, nbytes=2**26, outputs=1e9))
    assert large / small > 64 * 1.2  # 64x the bytes, and DRAM is slower than cache
    bigger_cache = dataclasses.replace(RIG, cache_bytes=2**28)
    assert seconds(table("elementwise", flops=1e4, nbytes=2**26, outputs=1e9), bigger_cache) < large


def test_forward_and_backward_have_their_own_efficiency() -> None:
    slow_backward = dataclasses.replace(
        FW, backward=dataclasses.replace(FW.backward, gemm_eff=FW.backward.gemm_eff / 4)
    )
    fwd, bwd = table(phase=FORWARD), table(phase=BACKWARD)
    assert seconds(fwd, fw=slow_backward) == pytest.approx(seconds(fwd))
    assert seconds(bwd, fw=slow_backward) > 2 * seconds(bwd)


def test_winograd_speeds_up_forward_kxk_convolutions_only() -> None:
    assert FW.winograd_speedup > 1
    conv = seconds(table("conv_kxk"))
    strided = seconds(table("conv_strided"))
    back = seconds(table("conv_kxk", phase=BACKWARD))
    assert conv < strided
    assert back == pytest.approx(seconds(table("conv_strided", phase=BACKWARD)))


def test_plain_gemms_run_at_the_matmul_speedup_of_the_convolutions_rate() -> None:
    """A linear layer / bmm is one BLAS call over the batch; a conv is lowered per image."""
    compute_bound = {"flops": 1e10, "nbytes": 1e5, "narrow": 1e4}
    for speedup in (1.0, 2.0):
        fw = dataclasses.replace(FW, matmul_speedup=speedup)
        conv = cpu_call_seconds(table("conv1x1", **compute_bound), RIG, fw, SHARED).roofline[0]
        gemm = cpu_call_seconds(table("matmul", **compute_bound), RIG, fw, SHARED).roofline[0]
        assert conv / gemm == pytest.approx(speedup)
    # MNN runs its inner products as 1x1 convolutions: the same kernels.
    assert CONSTS.framework("mnn").matmul_speedup == 1.0


def test_per_call_dispatch_is_serial_and_scales_with_the_main_clock() -> None:
    """A tiny call costs its dispatch, in cycles of the main core, whatever the threads."""
    tiny = table("elementwise", flops=10, nbytes=100, outputs=10)
    slow = dataclasses.replace(RIG, main_ghz=1.0)
    assert seconds(tiny, slow) == pytest.approx(2 * seconds(tiny), rel=0.01)
    assert seconds(tiny, dataclasses.replace(RIG, threads=1.0)) == pytest.approx(seconds(tiny))
    calls = cpu_call_seconds(tiny, RIG, FW, SHARED)
    assert calls.dispatch[0] > 10 * calls.roofline[0]


def test_the_update_runs_on_one_thread() -> None:
    update = table("elementwise", phase=OPTIMIZER, flops=1e8, nbytes=4e8, outputs=1e8)
    assert seconds(update, dataclasses.replace(RIG, threads=1.0)) == pytest.approx(seconds(update))


def test_im2col_and_weight_repacking_are_charged_when_the_framework_does_them() -> None:
    base = seconds(table("conv_kxk", phase=BACKWARD))
    unfolded = cpu_call_seconds(table("conv_kxk", phase=BACKWARD, unfold=4e7), RIG, FW, SHARED)
    assert unfolded.unfold[0] > 0 and unfolded.total[0] > base
    repacking = dataclasses.replace(FW, forward=dataclasses.replace(FW.forward, repack_weights=1.0))
    assert cpu_call_seconds(table(weights=4e7), RIG, repacking, SHARED).repack[0] > 0
    none = dataclasses.replace(FW, forward=dataclasses.replace(FW.forward, repack_weights=0.0))
    assert cpu_call_seconds(table(weights=4e7), RIG, none, SHARED).repack[0] == 0.0


def test_weights_once_per_step_activations_per_sample() -> None:
    """Batch 1 -> 16 of an FC-like call: weight traffic fixed, activation traffic x16.

    On a board whose DRAM the weight stream saturates (2 GB/s): with more bandwidth
    the batch-1 call is a GEMM one column wide, compute-bound at the fitted
    `narrow_half`, and batch 16's outputs keep more threads busy, so the two
    steps can come out within a fraction of a percent either way.
    """
    weights = 4e7
    rig = dataclasses.replace(RIG, dram_gbs=2.0)

    def step(batch: int) -> float:
        t = table(
            "matmul",
            flops=2e7 * batch,
            nbytes=weights + 4e4 * batch,
            narrow=min(batch, 512),
            outputs=1e3 * batch,
            weights=weights,
        )
        return seconds(t, rig)

    assert step(16) < 16 * step(1)  # the weight stream is shared by the batch
    assert step(16) > step(1)


def test_class_breakdown_sums_the_non_update_calls() -> None:
    t = CallTable.concat([table("conv1x1"), table("depthwise"), table("elementwise", OPTIMIZER)])
    calls = cpu_call_seconds(t, RIG, FW, SHARED)
    split = by_class(t, calls.roofline)
    assert split["dense"] == pytest.approx(calls.roofline[0])
    assert split["depthwise"] == pytest.approx(calls.roofline[1])
    assert split["elementwise"] == 0.0


def test_gpu_launch_overhead_dominates_tiny_kernels_and_occupancy_small_ones() -> None:
    fw = CONSTS.gpu_framework("tensorflow")
    rig = GpuRig(lanes=256.0, peak_gflops=665.0, dram_gbs=59.7, copy_gbs=59.7, host_ghz=2.0)
    tiny = gpu_call_seconds(table(flops=10, nbytes=100, outputs=10), rig, fw)
    assert tiny.total[0] >= fw.launch_us * 1e-6
    small = gpu_call_seconds(table(outputs=1e3), rig, fw).device[0]
    large = gpu_call_seconds(table(outputs=1e7), rig, fw).device[0]
    assert small > 5 * large  # the same FLOPs on a few thousand outputs leave lanes idle
    copied = dataclasses.replace(fw, transfer_fraction=2.0)
    assert gpu_call_seconds(table(), rig, copied).transfer[0] > 0
    assert gpu_call_seconds(table(), rig, fw).transfer[0] == 0.0


def test_pools_and_norms_pay_cycles_per_element_written() -> None:
    """Same FLOPs and bytes: a pool or a norm costs its per-output cycles on top of a stream."""
    one = dataclasses.replace(RIG, threads=1.0)
    stream = seconds(table("elementwise", flops=1e3, nbytes=1e3, outputs=1e6), one)
    for kind, cycles in (("pool", FW.pool_cycles_per_output), ("norm", FW.norm_cycles_per_output)):
        call = table(kind, flops=1e3, nbytes=1e3, outputs=1e6)
        expected = 1e6 * cycles / (RIG.main_ghz * 1e9)
        assert seconds(call, one) - stream == pytest.approx(expected, rel=0.01), kind
    pools = by_class(table("pool"), np.ones(1))
    assert pools["elementwise"] == 1.0 and pools["dense"] == 0.0  # pools count as elementwise


def test_a_device_kernel_scale_scales_its_own_kind_only() -> None:
    """profile_device's ratios: each one moves the calls of its kind and nothing else."""
    conv = table("conv1x1", flops=1e10, nbytes=1e6)
    dw = table("depthwise", flops=1e9, nbytes=1e6)
    pool = table("pool", flops=1e5, nbytes=1e5, outputs=1e6)
    unfolded = table("conv_kxk", phase=BACKWARD, flops=1e6, nbytes=1e5, unfold=4e8)
    faster_gemm = dataclasses.replace(RIG, gemm_scale=2.0)
    assert seconds(conv, faster_gemm) == pytest.approx(seconds(conv) / 2, rel=0.02)
    assert seconds(dw, faster_gemm) == seconds(dw)
    assert seconds(dw, dataclasses.replace(RIG, depthwise_scale=4.0)) < seconds(dw) / 3
    slow_pools = dataclasses.replace(RIG, pool_scale=3.0)
    assert seconds(pool, slow_pools) > 2.5 * seconds(pool) and seconds(conv, slow_pools) == seconds(
        conv
    )
    direct = cpu_call_seconds(unfolded, dataclasses.replace(RIG, unfold_scale=0.0), FW, SHARED)
    assert direct.unfold[0] == 0.0 < cpu_call_seconds(unfolded, RIG, FW, SHARED).unfold[0]


def test_a_norm_streams_its_operands_norm_passes_times() -> None:
    """A training batch norm reads its input twice: out of cache, its DRAM traffic is
    `norm_passes` times its bytes; a plain elementwise call of the same bytes streams once."""
    one = dataclasses.replace(RIG, threads=1.0)
    fw = dataclasses.replace(FW, norm_cycles_per_output=0.0, norm_passes=2.0)
    stream = seconds(table("elementwise", flops=1e3, nbytes=2**28, outputs=1e3), one, fw)
    norm = seconds(table("norm", flops=1e3, nbytes=2**28, outputs=1e3), one, fw)
    assert norm == pytest.approx(2.0 * stream, rel=0.02)
    once = dataclasses.replace(fw, norm_passes=1.0)
    assert seconds(table("norm", flops=1e3, nbytes=2**28, outputs=1e3), one, once) == (
        pytest.approx(stream, rel=0.01)
    )


GPU_RIG = GpuRig(lanes=768.0, peak_gflops=898.5, dram_gbs=34.1, copy_gbs=34.1, host_ghz=2.0)


def test_an_asynchronous_queue_hides_the_shorter_of_host_and_gpu_work() -> None:
    """overlap 1 (CUDA streams): a call costs the slower of its kernel and its dispatch;
    overlap 0 (an executor that waits on every call): the two add up, plus `sync_us`."""
    fw = dataclasses.replace(
        CONSTS.gpu_framework("tensorflow"), transfer_fraction=0.0, dispatch_kcycles=100.0
    )
    call = table(flops=1e8, nbytes=1e6, outputs=1e7)
    queued = gpu_call_seconds(call, GPU_RIG, dataclasses.replace(fw, overlap=1.0, sync_us=0.0))
    device, host = queued.device[0], queued.dispatch[0]
    assert queued.total[0] == pytest.approx(max(device, host))
    waiting = gpu_call_seconds(call, GPU_RIG, dataclasses.replace(fw, overlap=0.0, sync_us=40.0))
    assert waiting.total[0] == pytest.approx(device + host + 40e-6)
    assert waiting.exposed_dispatch[0] == pytest.approx(host)


def test_tensorflow_pays_a_filter_transform_per_convolution_not_per_matmul() -> None:
    """TensorFlow keeps filters HWIO and cuDNN takes OIHW (conv_ops.cc's TransformFilter):
    each convolution call reads and writes its filter `filter_transform_passes` times at
    `transform_eff` of the DRAM bandwidth, plus one more launch; a matmul, and a stack
    that lays its filters out once (passes 0), pays nothing."""
    fw = dataclasses.replace(
        CONSTS.gpu_framework("tensorflow"), filter_transform_passes=2.0, transform_eff=0.1
    )
    rig = GpuRig(lanes=256.0, peak_gflops=665.0, dram_gbs=59.7, copy_gbs=59.7, host_ghz=2.0)
    none = dataclasses.replace(fw, filter_transform_passes=0.0)
    conv = table(kind="conv_kxk", weights=9.4e6)
    extra = gpu_call_seconds(conv, rig, fw).device[0] - gpu_call_seconds(conv, rig, none).device[0]
    assert extra == pytest.approx(2.0 * 9.4e6 / 1e9 / (59.7 * 0.1) + fw.launch_us * 1e-6)
    matmul = table(kind="matmul", weights=9.4e6)
    same = gpu_call_seconds(matmul, rig, none).device[0]
    assert gpu_call_seconds(matmul, rig, fw).device[0] == same
