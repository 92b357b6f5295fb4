"""Every study on emulated profiles with tiny models: the papers' qualitative facts hold."""

from __future__ import annotations

import json
import math

import pytest

from fedbench.characterize import run_study
from fedbench.characterize.emulated import core_groups
from fedbench.characterize.output import StudyResult, number, read_csv
from fedbench.characterize.registry import build_study
from fedbench.devices.profile import load_profile

Rows = list[dict[str, str]]


def run(
    tmp: pytest.TempPathFactory, study: str, device: str, **overrides: str
) -> tuple[StudyResult, Rows]:
    out = tmp.mktemp(f"{study}-{device}")
    result = run_study(study, device, overrides, out)
    rows = read_csv(result.csv)
    # The CSV has exactly the documented columns, and the figures and meta.json exist.
    assert list(rows[0]) == list(build_study(study, {}).columns)
    assert result.figures and all(
        f.suffix == ".png" and f.stat().st_size > 0 for f in result.figures
    )
    meta = json.loads((out / "meta.json").read_text())
    assert meta["study"] == study and meta["device"] == device and meta["wall_s"] >= 0
    return result, rows


def col(rows: Rows, key: str, **where: str) -> list[float]:
    return [number(r[key]) for r in rows if all(r[k] == v for k, v in where.items())]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Rows:
    _, rows = run(
        tmp_path_factory,
        "batch_sweep",
        "jetson_tx2",
        models="small_cnn,dqn",
        batches="1,2,4,8,32",
        exact_max_batch="4",
    )
    return rows


def test_batch_sweep_throughput_rises_and_memory_splits(sweep: Rows) -> None:
    for model in ("small_cnn", "dqn"):
        tput = col(sweep, "throughput_samples_s", model=model)
        assert len(tput) == 5 and all(b > a for a, b in zip(tput[:-1], tput[1:], strict=True))
        per_sample = col(sweep, "energy_per_sample_j", model=model)
        assert all(b < a for a, b in zip(per_sample[:-1], per_sample[1:], strict=True))
        # Paper 000 obs. 9: weights, gradients, optimizer state are flat; feature maps grow.
        for key in ("mem_weights_mb", "mem_gradients_mb", "mem_optimizer_mb"):
            assert len(set(col(sweep, key, model=model))) == 1, key
        acts = col(sweep, "mem_activations_mb", model=model)
        assert acts[-1] == pytest.approx(32 * acts[0], rel=0.05)
        terms = [k for k in sweep[0] if k.startswith("mem_") and k != "mem_budget_mb"]
        for r in (r for r in sweep if r["model"] == model):
            assert number(r["peak_mem_mb"]) == pytest.approx(
                sum(number(r[k]) for k in terms), rel=1e-4
            )
    sources = [r["workload_source"] for r in sweep if r["model"] == "dqn"]
    assert sources == ["measured"] * 3 + ["extrapolated from batch 2,4"] * 2


def test_cpu_config_paper001_extremes(tmp_path_factory: pytest.TempPathFactory) -> None:
    result, rows = run(
        tmp_path_factory, "cpu_config", "meizu_16t", model="small_cnn", batch_size="16"
    )
    configs = [r["config"] for r in rows]
    assert {c.split()[0] for c in configs} == {"big", "little", "hybrid"}
    assert "big 4x H" in configs and "little 1x L" in configs and "hybrid 8x H" in configs
    assert all(r["status"] == "ok" for r in rows)
    fastest = min(rows, key=lambda r: number(r["step_latency_s"]))
    frugal = min(rows, key=lambda r: number(r["energy_active_j"]))
    assert fastest["config"] == "big 4x H"
    assert frugal["config"] == "little 1x L"
    assert number(frugal["step_latency_s"]) > 10 * number(fastest["step_latency_s"])
    # Lower clocks run slower on every core group (paper 001's hybrid row too: 3.8,
    # 6.5 and 50.4 s): H sets every cluster's top step, not the phone's default
    # governor, which holds less under a sustained load.
    for group in ("big 4x", "little 4x", "hybrid 8x"):
        h, m, low = (col(rows, "step_latency_s", config=f"{group} {lv}")[0] for lv in "HML")
        assert h < m < low
    meizu = load_profile("meizu_16t")
    top = (meizu.cluster("prime").max_freq_ghz + 3 * meizu.cluster("gold").max_freq_ghz) / 4
    assert col(rows, "freq_ghz", config="big 4x H") == [pytest.approx(top, rel=1e-4)]
    assert any("little 1x L" in line for line in result.summary)


def test_cpu_config_single_cluster_device(tmp_path_factory: pytest.TempPathFactory) -> None:
    _, rows = run(tmp_path_factory, "cpu_config", "rpi4", model="small_cnn", batch_size="4")
    assert [r["config"] for r in rows if r["level"] == "H"] == ["all 1x H", "all 2x H", "all 4x H"]


def test_equally_fast_clusters_are_one_kind_of_core() -> None:
    # The TX2's Denver2 and A57 have the same modelled peak: no big/little split.
    groups = core_groups(load_profile("jetson_tx2"))
    assert [(g, [c.name for c in cs]) for g, cs in groups] == [("all", ["denver", "a57"])]
    assert [g for g, _ in core_groups(load_profile("pixel2"))] == ["big", "little", "hybrid"]


def test_width_depth_grid_and_depthwise(tmp_path_factory: pytest.TempPathFactory) -> None:
    result, rows = run(
        tmp_path_factory,
        "width_depth",
        "pixel2",
        depths="1,2",
        widths="64,128",
        batch_size="8",
    )
    assert {(r["family"], r["depth"], r["width"]) for r in rows} >= {
        ("fc_only", "2", "128"),
        ("conv_only", "2", "64"),
        ("dwconv_only", "1", "128"),
    }
    # Paper 002 Tables 4-5 count the stack: FC 1x64 is 196,672, conv 2x64 38,720 parameters.
    assert col(rows, "stack_params", family="fc_only", depth="1", width="64") == [3072 * 64 + 64]
    assert col(rows, "stack_params", family="conv_only", depth="2", width="64") == [38720]
    for r in rows:
        assert number(r["infer_latency_s"]) < number(r["train_latency_s"])
        assert number(r["infer_gflop"]) < number(r["train_gflop"])
    deep, shallow = (
        col(rows, "train_latency_s", family="conv_only", depth=d, width="128")[0] for d in "21"
    )
    assert deep > 1.5 * shallow
    # Depthwise layers do far fewer FLOPs than dense ones of the same width but
    # run far below peak (MNN's fitted depthwise efficiency: paper 001's
    # MobileNet rows), so they cost more time per FLOP.
    (dw_s, dw_gflop), (conv_s, conv_gflop) = (
        (
            col(rows, "train_latency_s", family=f, depth="1", width="128")[0],
            col(rows, "train_gflop", family=f, depth="1", width="128")[0],
        )
        for f in ("dwconv_only", "conv_only")
    )
    assert dw_gflop < conv_gflop
    assert dw_s / dw_gflop > conv_s / conv_gflop
    assert any(line.startswith("depthwise vs conv") for line in result.summary)


def test_op_breakdown_backward_outweighs_forward(tmp_path_factory: pytest.TempPathFactory) -> None:
    _, rows = run(
        tmp_path_factory, "op_breakdown", "pixel2", models="conv_only,small_cnn", batch_size="16"
    )
    for model in ("conv_only", "small_cnn"):
        shares = col(rows, "share", model=model)
        assert sum(shares) == pytest.approx(1.0, rel=1e-4)
        fwd, bwd = (sum(col(rows, "share", model=model, phase=p)) for p in ("forward", "backward"))
        assert bwd > fwd > 0
    # Paper 002's four-layer conv stack: gradient kernels are about two thirds
    # of the step; the emulator (pixel2, MNN's fitted backward) says ~0.81.
    grads = sum(col(rows, "share", model="conv_only", phase="backward", op_class="dense"))
    assert 0.5 < grads < 0.85


@pytest.mark.parametrize("device", ["pixel2", "rpi4"])
def test_background_slowdown_is_the_os_share(
    tmp_path_factory: pytest.TempPathFactory, device: str
) -> None:
    _, rows = run(tmp_path_factory, "background", device, models="small_cnn", batch_size="8")
    assert [r["priority"] for r in rows] == ["foreground", "background"]
    slow = number(rows[1]["slowdown"])
    assert slow == pytest.approx(1 / load_profile(device).os.background_share, rel=1e-4)
    if device == "pixel2":  # paper 002's phone: ~3x
        assert 2.5 < slow < 3.5


def test_oom_rows_keep_their_memory_terms(tmp_path_factory: pytest.TempPathFactory) -> None:
    # The widest, deepest conv stack of paper 002 needs ~2 GB at batch 128: not on a 1 GB Pi.
    _, rows = run(
        tmp_path_factory,
        "width_depth",
        "rpi3bplus",
        families="conv_only",
        depths="8",
        widths="512",
        dw_depths="",
        batch_size="128",
    )
    (row,) = rows
    assert row["status"] == "oom" and "training budget" in row["reason"]
    assert row["train_latency_s"] == "" and number(row["peak_mem_mb"]) > number(
        row["mem_budget_mb"]
    )
    assert math.isfinite(number(row["train_gflop"]))
