"""The source papers' qualitative facts, reproduced through the emulator.

Each test names the paper's figure next to the emulator's in its docstring
and asserts the fact (the direction, and a band around the paper's number
where the paper gives one), on real zoo-model workloads measured once per
module (cached under fedbench's cache dir).
"""

from __future__ import annotations

import pytest

from fedbench.core.workload import Workload
from fedbench.devices.emulator import Emulation, emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.profile import DeviceProfile, initial_state, load_profile
from fedbench.measure.workload import measure_workload
from fedbench.models import build_model

MIN = 60.0
DEFAULT = Knobs()


def workload(model: str, batch: int, **kw: object) -> Workload:
    net, shape = build_model(model)
    return measure_workload(net, tuple(shape), batch, model_name=model, **kw)  # type: ignore[arg-type]


def run(p: DeviceProfile | str, w: Workload, knobs: Knobs = DEFAULT, steps: int = 1) -> Emulation:
    p = load_profile(p) if isinstance(p, str) else p
    return emulate(p, [(w, steps)], initial_state(p, 0.0), knobs)


def above_idle_j(e: Emulation) -> float:
    return e.energy_j - e.energy_terms_j["idle"]


def test_paper000_throughput_rises_with_batch_most_on_the_tx2_gpu() -> None:
    """Paper 000 Fig. 6 / Obs. 10: on the TX2's GPU, throughput rises with the
    batch for every model; ResNet50 9 -> 55 samples/s (6.1x) from batch 4 to 64.
    The emulator (ResNet18, batch 1 -> 16): rising on the GPU (2.3x) and on the
    CPU (1.5x); the GPU gains more from the batch (a GPU is filled by batch
    parallelism)."""
    gains = {}
    for device in ("gpu", "cpu"):
        rates = [
            b / run("jetson_tx2", workload("resnet18", b), Knobs(device=device)).latency_s
            for b in (1, 4, 16)
        ]
        assert rates == sorted(rates), (device, rates)
        gains[device] = rates[-1] / rates[0]
    assert gains["gpu"] > gains["cpu"] > 1.0


def test_paper001_big_cores_fastest_little_core_at_min_clock_least_energy() -> None:
    """Paper 001 (Snapdragon 855, MNN): 4 big cores at the top clock are fastest;
    1 little core at the lowest clock uses the least energy, 28.9x slower at
    43.7% of the fastest's energy. The emulator (meizu_16t, MobileNetV2 batch 4):
    the same two configurations win, the frugal one 36x slower at 15.6% of the
    fastest's energy (asserted: 10x-100x slower, less energy)."""
    w = workload("mobilenetv2", 4)
    grid = {}
    for clusters, counts in ((("prime", "gold"), (1, 4)), (("silver",), (1, 4)), ((), (8,))):
        for n in counts:
            for freq in (None, 1.4016, 0.01):  # top, middle, lowest step
                grid[(clusters, n, freq)] = run(
                    "meizu_16t", w, Knobs(cores=n, clusters=clusters, freq_ghz=freq)
                )
    fastest = min(grid, key=lambda k: grid[k].latency_s)
    frugal = min(grid, key=lambda k: above_idle_j(grid[k]))
    assert fastest == (("prime", "gold"), 4, None)
    assert frugal == (("silver",), 1, 0.01)
    slower = grid[frugal].latency_s / grid[fastest].latency_s
    energy = above_idle_j(grid[frugal]) / above_idle_j(grid[fastest])
    assert 10 < slower < 100 and energy < 1.0


def test_paper002_background_priority_about_three_times_slower() -> None:
    """Paper 002: training at background priority is ~3x slower (the OS gives
    it about a third of the CPU). The emulator (pixel2, LeNet): 3.0x
    (asserted: 2.5x-3.5x)."""
    w = workload("lenet", 16)
    fg, bg = run("pixel2", w), run("pixel2", w, Knobs(background=True))
    assert 2.5 < bg.latency_s / fg.latency_s < 3.5


def test_s8plus_big_cores_lock_to_1_88_ghz_after_about_38_minutes() -> None:
    """Public S8 Plus training trace (calibration/data/README.md): the big cores
    ran at 2.36 GHz and locked to ~1.88 GHz after ~38 min of training. The
    emulator: top clock for the first 20 min, the first trip (cap 1.86 GHz)
    between 25 and 55 min; the temperature then holds at the trip, the
    governor alternating between the cap and the top step (on MobileNetV2
    the clock averages under 0.92x the top step from then on, never below
    the cap) where the phone held the cap."""
    p = load_profile("samsung_s8plus")
    w = workload("mobilenetv2", 8)
    step_s = run(p, w).latency_s
    state, clock, t = initial_state(p, 0.0), [], 0.0
    while t < 60 * MIN:
        e = emulate(p, [(w, max(1, int(MIN / step_s)))], state, Knobs())
        state, t = e.state, t + e.latency_s
        clock.append((t, e.freq_ghz_avg, e.latency_s))
    top = max(c.max_freq_ghz for c in p.clusters)
    assert all(f == pytest.approx(top, rel=0.02) for s, f, _ in clock if s < 20 * MIN)
    locked = next(s for s, f, _ in clock if f < 0.9 * top)
    assert 25 * MIN < locked < 55 * MIN
    after = [f for s, f, _ in clock if s > locked]
    assert min(after) >= 1.8624
    assert sum(after) / len(after) < 0.92 * top


MNN_MODELS = ("lenet_mnn", "alexnet_mnn", "googlenet_mnn", "squeezenet_mnn", "mobilenetv2")


@pytest.mark.parametrize("model", MNN_MODELS)
def test_paper001_a_phone_gpu_trains_1_8x_to_12x_slower_than_its_cpu(model: str) -> None:
    """Paper 001, figure "Mobile CPU vs. Mobile GPU" (MNN, Mali and Adreno): both GPUs
    train 1.8x-12.0x slower than the CPU. The emulator (xiaomi_mi9, Adreno 640 through MNN
    OpenCL against MNN on 4 CPU threads, batch 16): every MNN model inside that band
    (SqueezeNet at batch 16 was 54x before the OpenCL kernels had a sane occupancy and
    the copies were solved against them)."""
    w = workload(model, 16)
    cpu = run("xiaomi_mi9", w)
    gpu = run("xiaomi_mi9", w, Knobs(device="gpu"))
    assert gpu.status == cpu.status == "ok"
    assert 1.8 <= gpu.latency_s / cpu.latency_s <= 12.0


def test_paper003_data_movement_is_about_91_percent_of_phone_gpu_training() -> None:
    """Paper 003 (abstract): on a Snapdragon 8-series GPU through MNN's OpenCL backend,
    data movement takes almost 91% of training time. The emulator sets the copies'
    efficiency from this figure on MobileNetV2 at batch 8 (Meizu 16T), so another model
    and phone test it: SqueezeNet at batch 16 on the MI 9's Adreno 640, host-device
    copies within 91% +- 10 points of its step."""
    w = workload("squeezenet", 16)
    gpu = run("xiaomi_mi9", w, Knobs(device="gpu"))
    assert 0.81 <= gpu.time_s["transfer"] / gpu.latency_s <= 1.0


def test_paper003_phone_gpu_gemm_kernels_run_at_40_to_70_gflops() -> None:
    """Paper 003 (abstract): MNN's optimised OpenCL kernels reach 40-70 GFLOP/s on
    Snapdragon 8-series GPUs, yet training is slower on the GPU than on the CPU because
    of data movement. The emulator (xiaomi_mi9, Adreno 640, batch 16, transfers
    excluded): the convolution kernels of AlexNet (53 GFLOP/s), ResNet18 (51),
    GoogLeNet (45) and SqueezeNet (42) all run inside 40-70 GFLOP/s (smaller convs
    fill less of the GPU); every step is still slower on the GPU."""
    for model in ("alexnet_mnn", "resnet18", "googlenet_mnn", "squeezenet_mnn"):
        w = workload(model, 16)
        gpu = run("xiaomi_mi9", w, Knobs(device="gpu"))
        dense = w.forward["dense"].flops + w.backward["dense"].flops
        rate = dense / 1e9 / gpu.time_s["dense"]
        assert 40.0 <= rate <= 70.0, (model, rate)
        assert gpu.latency_s > run("xiaomi_mi9", w).latency_s, model


def _tx2_gpu(model: str, batch: int) -> Emulation:
    net, _ = build_model(model)
    w = measure_workload(net, (3, 32, 32), batch, model_name=model, optimizer="sgd_momentum")
    return run("jetson_tx2", w, Knobs(device="gpu"))


def test_paper000_tx2_gpu_throughput_curve_rises_and_flattens_with_the_batch() -> None:
    """Paper 000 Fig. 8 (Observations 10-11): on the TX2's GPU (TensorFlow, CIFAR-10)
    throughput rises with the batch for every model, and by model-specific amounts:
    DenseNet40 1.7x and ResNet50 6.1x from batch 4 to 64. The emulator (ResNet50 on
    32x32 inputs, calibration/setups.yaml), batches 4-64:
    throughput rises at every doubling, each doubling gains less than the one before (the
    GPU fills up), ResNet50 gains more than DenseNet40, and each gain is within a factor
    of 1.6 of the paper's."""
    batches = (4, 8, 16, 32, 64)
    gains = {}
    for model, published in (("densenet40", 1.7), ("resnet50", 6.1)):
        rate = [b / _tx2_gpu(model, b).latency_s for b in batches]
        steps = [b / a for a, b in zip(rate, rate[1:], strict=False)]
        assert all(s > 1.0 for s in steps), (model, rate)
        assert steps == sorted(steps, reverse=True), (model, steps)
        gains[model] = rate[-1] / rate[0]
        assert published / 1.6 <= gains[model] <= published * 1.6, (model, gains[model])
    assert gains["resnet50"] > gains["densenet40"]


@pytest.mark.xfail(
    strict=True,
    reason="known gap (calibration/report.md): the fitted TX2 stack keeps the GPU 92-99% busy "
    "at every batch; its four time rows pull harder than the utilisation figures",
)
def test_paper000_tx2_gpu_utilisation_rises_with_the_batch() -> None:
    """Paper 000 Observation 3 (Fig. 4, tegrastats): GPU utilisation rises with the batch,
    DenseNet 81.6% -> 96.4% and ResNet50 85.6% -> 95.6% from batch 4 to 64. The emulator:
    the GPU's busy share of the step rises for both, each within 10 points of the paper."""
    for model, published in (("densenet40", (0.816, 0.964)), ("resnet50", (0.856, 0.956))):
        util = [_tx2_gpu(model, b).gpu_busy_frac for b in (4, 64)]
        assert util[1] > util[0], (model, util)
        for got, want in zip(util, published, strict=True):
            assert abs(got - want) <= 0.10, (model, util)


@pytest.mark.xfail(
    strict=True,
    reason="known gap (calibration/report.md): ResNet50 on 32x32 inputs is bound by fixed "
    "per-step costs on the emulated TX2 GPU (launches, filter re-layouts), its energy per "
    "step grows 1.8x, under the paper's 2.2x",
)
def test_paper000_tx2_gpu_energy_per_step_grows_less_than_the_batch() -> None:
    """Paper 000 Observation 8 (Fig. 6): from batch 4 to 64 (16x) a step's energy grows
    2.2x-10.5x across its vision models. The emulator on the TX2's GPU: DenseNet40 and
    ResNet50 both inside that range."""
    for model in ("densenet40", "resnet50"):
        grow = _tx2_gpu(model, 64).energy_j / _tx2_gpu(model, 4).energy_j
        assert 2.2 <= grow <= 10.5, (model, grow)


def test_paper004_sage_cuts_memory_over_20x_at_a_modest_time_cost() -> None:
    """Paper 004 (Sage): micro-batching with gradient checkpointing cuts peak
    training memory by >20x at a modest time cost. The emulator (rpi4,
    SqueezeNet at batch 32, 32 micro-batches of 1 with checkpointing): the
    tensors' peak falls 23.7x at 1.34x the full batch's step time (asserted:
    >20x at <2x)."""
    net, shape = build_model("squeezenet")
    full = measure_workload(net, tuple(shape), 32, model_name="squeezenet")
    sage = measure_workload(
        net,
        tuple(shape),
        32,
        model_name="squeezenet",
        microbatches=32,
        checkpoint_segments=4,
        plan="32x1+ckpt4",
    )
    a, b = run("rpi4", full), run("rpi4", sage)
    assert a.peak_mem_mb / b.peak_mem_mb > 20
    assert b.latency_s / a.latency_s < 2.0
