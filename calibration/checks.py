"""Out-of-sample checks: the papers' other published figures, predicted, never fitted.

Each check runs the emulator with the fitted constants on a setup the
calibration rows do not contain (another device, core setting, framework
or model) and sets the prediction next to the published figure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fedbench.characterize.emulated import LOWEST_CAP_GHZ, top_cap_ghz
from fedbench.devices.constants import Constants
from fedbench.devices.emulator import Emulation, emulate
from fedbench.devices.knobs import Knobs
from fedbench.devices.meter import DeviceState
from fedbench.devices.profile import initial_state, load_profile
from fedbench.measure.workload import Workload, measure_workload

DEFAULT_KNOBS = Knobs()


@dataclass(frozen=True)
class Check:
    name: str
    source: str
    published: str
    predicted: str
    note: str


def load(model: str, batch: int, input_shape: tuple[int, ...] | None = None) -> Workload:
    from fedbench.models import build_model

    net, shape = build_model(model)
    return measure_workload(net, input_shape or tuple(shape), batch, model_name=model)


def run(
    consts: Constants,
    device: str,
    w: Workload,
    knobs: Knobs = DEFAULT_KNOBS,
    steps: int = 1,
    state: DeviceState | None = None,
) -> Emulation:
    profile = load_profile(device)
    return emulate(profile, [(w, steps)], state or initial_state(profile, 0.0), knobs, consts)


def _ms(e: Emulation) -> str:
    return "OOM" if e.status == "oom" else f"{1000 * e.latency_s:.0f}"


def paper001_batches(consts: Constants) -> list[Check]:
    """Paper 001 per-batch times; the model is taken to be MobileNetV2 at 224x224
    (the Note 10 MNN times match the Meizu MobileNetV2 rows within 3%)."""
    sizes = (1, 2, 4)
    loads = [load("mobilenetv2", b) for b in sizes]
    out = []
    cases = (
        ("samsung_note10", "mnn", "516 / 812 / 1365"),
        ("rpi3bplus", "mnn", "6698 / 10651 / OOM"),
        ("rpi3bplus", "pytorch", "48274 / 79097 / OOM"),
    )
    for device, fw, published in cases:
        es = [run(consts, device, w, Knobs(framework=fw)) for w in loads]
        out.append(
            Check(
                f"{device} {fw} MobileNetV2 ms/step, batch 1/2/4",
                "paper 001 (README)",
                published,
                " / ".join(_ms(e) for e in es),
                f"batch 4 peak {es[-1].peak_mem_mb:.0f} MB, budget {es[-1].mem_budget_mb:.0f} MB",
            )
        )
    return out


def paper001_devices(consts: Constants) -> list[Check]:
    """Paper 001's cross-device claims, at each phone's default clocks (batch 8)."""
    phones = (
        "meizu_16t",
        "xiaomi_mi9",
        "huawei_mate30",
        "samsung_s8plus",
        "redmi_note9pro",
        "honor8",
    )
    mnv2 = load("mobilenetv2", 8)
    t = {d: run(consts, d, mnv2).latency_s for d in phones}
    out = [
        Check(
            "MobileNetV2 disparity, Samsung S8 Plus vs Meizu 16T",
            "paper 001",
            "up to 4.0x",
            f"{t['samsung_s8plus'] / t['meizu_16t']:.1f}x",
            f"slowest phone: {max(t, key=lambda d: t[d])}",
        )
    ]
    for model, published in (("squeezenet_mnn", "meizu_16t"), ("alexnet_mnn", "huawei_mate30")):
        w = load(model, 8)
        times = {d: run(consts, d, w).latency_s for d in phones}
        out.append(
            Check(
                f"fastest phone for {model}",
                "paper 001 (model affinity)",
                published,
                min(times, key=lambda d: times[d]),
                "threads split work evenly, so a cluster's slowest core sets the pace",
            )
        )
    return out


# Paper 001's CPU-configuration table (time s, energy J) per setting x clock
# step (H, M, L). Its model and batch are not named, so only ratios to
# "big 4x H" are compared: they cancel the workload to first order and test
# the power model's clusters, clocks and core counts on 20 measured points.
PAPER001_CPU_TABLE: dict[str, tuple[float, float]] = {
    "big 1x H": (4.2, 10.6),
    "big 1x M": (5.4, 8.0),
    "big 1x L": (10.8, 6.9),
    "big 2x H": (2.6, 8.9),
    "big 2x M": (3.2, 7.7),
    "big 2x L": (6.4, 7.0),
    "big 4x H": (2.0, 7.1),
    "big 4x M": (3.3, 8.7),
    "big 4x L": (8.4, 8.2),
    "little 1x H": (25.0, 10.4),
    "little 1x M": (33.9, 7.2),
    "little 1x L": (57.8, 3.1),
    "little 2x H": (13.3, 10.1),
    "little 2x M": (18.0, 8.4),
    "little 2x L": (31.8, 4.8),
    "little 4x H": (8.0, 11.4),
    "little 4x M": (11.0, 9.6),
    "little 4x L": (52.3, 8.2),
    "hybrid 8x H": (3.8, 13.4),
    "hybrid 8x M": (6.5, 13.9),
    "hybrid 8x L": (50.4, 14.4),
}


def _ratio_mape(
    grid: dict[str, Emulation], which: int, value: Callable[[Emulation], float]
) -> float:
    ref = value(grid["big 4x H"])
    errors = [
        abs((value(grid[k]) / ref) / (v[which] / PAPER001_CPU_TABLE["big 4x H"][which]) - 1)
        for k, v in PAPER001_CPU_TABLE.items()
        if k != "big 4x H"
    ]
    return 100.0 * sum(errors) / len(errors)


def paper001_cores(consts: Constants) -> list[Check]:
    """Paper 001's CPU-configuration table, on the Meizu 16T (MobileNetV2, batch 4)."""
    w = load("mobilenetv2", 4)
    # H and L as the cpu_config study sets them: every cluster at its top step (not
    # the phone's default governor, which holds less) and at its lowest.
    top = top_cap_ghz(list(load_profile("meizu_16t").clusters))
    freqs = {"H": top, "M": 1.4016, "L": LOWEST_CAP_GHZ}
    grid: dict[str, Emulation] = {}
    for group, clusters, counts in (
        ("big", ("prime", "gold"), (1, 2, 4)),
        ("little", ("silver",), (1, 2, 4)),
        ("hybrid", (), (8,)),
    ):
        for n in counts:
            for tag, f in freqs.items():
                knobs = Knobs(cores=n, clusters=clusters, freq_ghz=f)
                grid[f"{group} {n}x {tag}"] = run(consts, "meizu_16t", w, knobs)

    def active_j(e: Emulation) -> float:  # paper 001 reports energy above idle
        return e.energy_j - e.energy_terms_j["idle"]

    fastest = min(grid, key=lambda k: grid[k].latency_s)
    frugal = min(grid, key=lambda k: active_j(grid[k]))
    slow = grid[frugal].latency_s / grid[fastest].latency_s
    share = active_j(grid[frugal]) / active_j(grid[fastest])

    def slower(name: str, a: str, b: str, note: str, digits: int = 1) -> Check:
        """How many times longer setting `a` takes than `b`: the paper's and the emulator's."""
        ta, tb = PAPER001_CPU_TABLE[a][0], PAPER001_CPU_TABLE[b][0]
        ratio = grid[a].latency_s / grid[b].latency_s
        published = f"{ta / tb:.1f}x ({ta} s vs {tb} s)"
        return Check(name, "paper 001 CPU table", published, f"{ratio:.{digits}f}x", note)

    return [
        Check("fastest CPU configuration", "paper 001 CPU table", "big 4x H", fastest, ""),
        Check(
            "least-energy configuration",
            "paper 001 CPU table",
            "little 1x L",
            frugal,
            "energy above idle, as the paper's 3.1 J over 57.8 s implies",
        ),
        Check("least-energy config: slowdown vs fastest", "paper 001", "28.9x", f"{slow:.1f}x", ""),
        Check(
            "CPU table: time relative to big 4x H, 20 settings",
            "paper 001 CPU table",
            "0% MAPE",
            f"{_ratio_mape(grid, 0, lambda e: e.latency_s):.1f}% MAPE",
            "never fitted; model and batch unnamed, so ratios (MobileNetV2 batch 4)",
        ),
        Check(
            "CPU table: energy above idle relative to big 4x H, 20 settings",
            "paper 001 CPU table",
            "0% MAPE",
            f"{_ratio_mape(grid, 1, active_j):.1f}% MAPE",
            "never fitted: the power model's clusters, clocks and core counts",
        ),
        Check(
            "least-energy config: energy vs fastest",
            "paper 001",
            "43.7%",
            f"{100 * share:.1f}%",
            "",
        ),
        slower(
            "hybrid 8x H time vs big 4x H",
            "hybrid 8x H",
            "big 4x H",
            "threads split work evenly, so the LITTLE cores set the pace",
            digits=2,
        ),
        slower(
            "one LITTLE core vs one big core, both at H",
            "little 1x H",
            "big 1x H",
            "no row runs on a LITTLE core: the in-order factor is not identified",
        ),
        slower("big 1x H vs big 4x H (four threads' gain)", "big 1x H", "big 4x H", ""),
        slower(
            "hybrid 8x L time vs big 4x H",
            "hybrid 8x L",
            "big 4x H",
            "the paper's eight threads at L are as slow as four LITTLE cores (52.3 s)",
        ),
    ]


def paper000_tx2(consts: Constants) -> list[Check]:
    """Paper 000 on the TX2's GPU (TensorFlow): the throughput figures not in the rows."""
    cifar = (3, 32, 32)
    gpu = Knobs(device="gpu")
    e = {
        (m, b): run(consts, "jetson_tx2", load(m, b, shape), gpu)
        for m, shape in (("densenet40", cifar), ("resnet50", cifar), ("dqn", None))
        for b in (4, 64)
    }

    def sps(model: str, batch: int) -> float:
        return batch / e[(model, batch)].latency_s

    energy = {m: e[(m, 64)].energy_j / e[(m, 4)].energy_j for m in ("densenet40", "resnet50")}
    terms = e[("resnet50", 64)].energy_terms_j
    gpu_share = terms["gpu"] / e[("resnet50", 64)].energy_j
    cpu64 = run(consts, "jetson_tx2", load("resnet50", 64, cifar))
    return [
        Check(
            "TX2 GPU deep-RL throughput gain, batch 4 -> 64",
            "paper 000 Observation 11",
            "15.3x (889 -> 13,618 samples/s)",
            f"{sps('dqn', 64) / sps('dqn', 4):.1f}x ({sps('dqn', 4):.0f} -> "
            f"{sps('dqn', 64):.0f} samples/s)",
            "Nature DQN (fedbench/conf/model/dqn.yaml); the published samples/s exceed what "
            "the TX2 GPU can do for it, so not a calibration row",
        ),
        Check(
            "TX2 GPU energy per step, batch 4 -> 64 (16x)",
            "paper 000 Observation 8",
            "2.2x - 10.5x",
            ", ".join(f"{m} {v:.1f}x" for m, v in energy.items()),
            "",
        ),
        Check(
            "TX2 GPU training power: GPU vs CPU vs memory, ResNet50 batch 64",
            "paper 000 Observation 6 (Fig. 7)",
            "GPU 4x the CPU's and 2x the memory's power; up to 57.4% of the system's",
            f"GPU {terms['gpu'] / terms['cpu']:.1f}x the CPU's, "
            f"{terms['gpu'] / terms['memory']:.1f}x the memory's; {100 * gpu_share:.0f}% of the "
            "system's",
            "GPU busy power is the profile's (derived from this observation); CPU and DRAM "
            "from the fitted power model",
        ),
        Check(
            "TX2 GPU vs CPU, ResNet50 at batch 64",
            "paper 000 Observation 1 (GPU does the heavy lifting)",
            "GPU much faster",
            f"GPU {e[('resnet50', 64)].latency_s:.2f} s vs CPU {cpu64.latency_s:.2f} s per step",
            "CPU: PyTorch on the 6 cores",
        ),
        Check(
            "TX2 DenseNet40 batch 64 fits in 8 GB",
            "paper 000",
            "yes (2.2 -> 5.9 GB intermediates, TF)",
            f"{e[('densenet40', 64)].status}, tensors {e[('densenet40', 64)].peak_mem_mb:.0f} MB,"
            f" resident {e[('densenet40', 64)].rss_mb:.0f} MB",
            "",
        ),
    ]


def paper002_003(consts: Constants) -> list[Check]:
    w = load("mobilenetv2", 8)
    fg = run(consts, "pixel2", w)
    bg = run(consts, "pixel2", w, Knobs(background=True))
    out = [
        Check(
            "Pixel 2 background vs foreground step time",
            "paper 002 section 4.7.1",
            "~3x",
            f"{bg.latency_s / fg.latency_s:.1f}x",
            "background share is a profile field (0.33)",
        )
    ]
    rates = []
    for model in ("resnet18", "googlenet_mnn", "mobilenetv2"):
        wl = load(model, 16)
        e = run(consts, "meizu_16t", wl)
        rates.append(f"{model} {wl.total_flops / 1e9 / e.latency_s:.1f}")
    out.append(
        Check(
            "Snapdragon 855 CPU training rate (GFLOP/s)",
            "paper 003",
            "15-30 GFLOP/s",
            ", ".join(rates),
            "default governor (sustained clock), 4 threads, batch 16",
        )
    )
    mnv2 = load("mobilenetv2", 8)
    gpu = run(consts, "meizu_16t", mnv2, Knobs(device="gpu"))
    share = gpu.time_s["transfer"] / gpu.latency_s
    kernels = sum(gpu.time_s[c] for c in ("dense", "depthwise", "elementwise", "movement"))
    ratios, shares = [], []
    for model in ("lenet_mnn", "alexnet_mnn", "googlenet_mnn", "squeezenet_mnn", "mobilenetv2"):
        w = load(model, 16)
        on_gpu = run(consts, "xiaomi_mi9", w, Knobs(device="gpu"))
        ratios.append(f"{model} {on_gpu.latency_s / run(consts, 'xiaomi_mi9', w).latency_s:.1f}x")
        shares.append(f"{100 * on_gpu.time_s['transfer'] / on_gpu.latency_s:.0f}%")
    out += [
        Check(
            "Phone GPU vs CPU training time, the five MNN models (batch 16)",
            "paper 001 (Mobile CPU vs. Mobile GPU: Mali and Adreno 1.8x-12.0x slower)",
            "GPU 1.8x-12x slower",
            "GPU " + ", ".join(ratios),
            "Xiaomi MI 9, Adreno 640 via MNN OpenCL; CPU: MNN on 4 threads (default governor)",
        ),
        Check(
            "Phone GPU: data movement share of training time",
            "paper 003 (abstract)",
            "~91%",
            f"MobileNetV2 b8 (Meizu 16T) {100 * share:.0f}% (kernels "
            f"{100 * kernels / gpu.latency_s:.0f}%); the five models on the MI 9: "
            + ", ".join(shares),
            "set from MobileNetV2's figure (mnn_opencl.copy_eff): the other models test it",
        ),
    ]
    return out


def s8plus_trace(consts: Constants) -> list[Check]:
    profile = load_profile("samsung_s8plus")
    w = load("mobilenetv2", 8)
    state = initial_state(profile, 0.0)
    elapsed = 0.0
    for _ in range(400):  # continuous training in 15-step chunks until the first trip
        e = run(consts, "samsung_s8plus", w, steps=15, state=state)
        if e.throttled_frac > 0:
            elapsed += e.latency_s * (1 - e.throttled_frac)
            break
        elapsed, state = elapsed + e.latency_s, e.state
    return [
        Check(
            "S8 Plus: continuous training until the big cores throttle",
            "README trace",
            "~38 min, 2.36 -> 1.88 GHz, +13 C",
            f"{elapsed / 60:.0f} min, cap {profile.thermal.trips[0].cap_ghz} GHz, "
            f"+{profile.thermal.trips[0].temp_c - profile.thermal.ambient_c:.0f} C",
            "consistency only: the S8 Plus thermal constants were set from this trace",
        )
    ]


def run_all(consts: Constants) -> list[Check]:
    return [
        *paper001_batches(consts),
        *paper001_devices(consts),
        *paper001_cores(consts),
        *paper000_tx2(consts),
        *paper002_003(consts),
        *s8plus_trace(consts),
    ]
