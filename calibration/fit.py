"""Fit the emulator's shared constants to the published measurements, and cross-validate the fit.

    python calibration/fit.py [--csv PATH] [--no-cv]
    python calibration/fit.py --host-only   # after benchmarks/profile_device.py

writes fedbench/devices/fitted_constants.yaml, calibration/report.md and
calibration/report.csv.

The shared constants (calibration/params.py: per framework and pass the
kernel efficiencies, per-call costs and im2col traffic; thread scaling,
cache, the phones' sustained clock, swapping; the TX2 GPU stack) are
fitted by least squares on log(predicted / measured) over every row's
training-step time, the MNN rows' resident set and the TX2 rows' GPU
utilisation (the MNN rows' forward passes are a check, not fitted: see
below), each parameter with a
log-normal prior that only matters where the rows cannot pin it down.
The power model's activity factors are fitted after them, to the rows'
measured whole-device power (calibration/energy.py). Never one constant per row. The
predictions are the emulator's own (calibration/predict.py, checked
against `fedbench.devices.emulator.emulate` row by row).

The in-sample error of such a fit says little about rows it has not seen,
so the same fit is repeated leaving one model out (every row of that zoo
model, on every device) and leaving one device out, and each held-out
row is predicted by the fit that did not see it: the out-of-fold errors
are the report's headline. Every fit starts from the prior centres.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml
from scipy.optimize import least_squares

sys.path.insert(0, str(Path(__file__).resolve().parent))

import energy  # noqa: E402
import params  # noqa: E402
from predict import Predictor  # noqa: E402
from rows import DEFAULT_CSV, ROOT, Row, load_rows, workload  # noqa: E402

from fedbench.devices.constants import FITTED_FILE, Constants  # noqa: E402
from fedbench.devices.kernels import gpu_call_seconds  # noqa: E402
from fedbench.devices.lowering import lower_workload  # noqa: E402
from fedbench.devices.profile import load_profile  # noqa: E402
from fedbench.devices.step import gpu_rig  # noqa: E402
from fedbench.measure.workload import Workload  # noqa: E402

# The MNN rows' forward passes are not fitted: they time MNN's eval path, whose
# convolutions take constant weights (Winograd and tiled kernels, each weight
# copied into its op per forward: express/module/NN.cpp, ConvModule's eval
# branch), where the training step's are im2col + MatMul over weights that are
# graph inputs (fedbench/devices/lowering.py). report.md checks them.
RSS_WEIGHT = 1.0
UTIL_WEIGHT = 1.0  # paper 000's GPU utilisation: how much of a step the GPU is busy
SCHEMES = ("lomo", "lodo")  # leave one model out, leave one device out


@dataclass(frozen=True)
class Fold:
    scheme: str
    held_out: str
    values: np.ndarray
    seconds: float
    energy: np.ndarray  # the power model's factors fitted without the held-out rows


def opencl_priors() -> dict[str, float]:
    """The mobile-GPU stack's (MNN OpenCL) constants before `derive_opencl`.

    No calibration row trains on a mobile GPU with a named model (paper
    001 publishes its GPU/CPU ratios as a figure, paper 003 its kernel rate
    and data-movement share), so none of these is fitted: they do not enter
    any fitted row's prediction, `derive_opencl` sets the ones papers 003
    and 001 pin down, and the checks hold the result against paper 001's
    1.8x-12x band (params.MNN_OPENCL_SOURCES says where each comes from).
    """
    return {
        "gemm_eff": 0.06,
        "depthwise_eff": 0.01,
        "elementwise_eff": 0.2,
        "narrow_half": 0.0,
        "occupancy_half_per_lane": 16.0,
        "launch_us": 30.0,
        "dispatch_kcycles": 50.0,
        "transfer_fraction": 2.0,
        "copy_eff": 1.0,
        "runtime_mb": 100.0,
        "rss_per_tensor_byte": 2.5,
        "overlap": 0.0,
        "sync_us": 50.0,
    }


class Objective:
    def __init__(self, rows: list[Row], predictor: Predictor) -> None:
        self.rows, self.predictor = rows, predictor
        self.measured = np.array([r.measured_s for r in rows])
        self.res = np.array([np.nan if r.peak_res_mb is None else r.peak_res_mb for r in rows])
        self.util = np.array([np.nan if r.gpu_util is None else r.gpu_util for r in rows])
        self.centre = np.log(params.guesses())
        self.sigma = np.array([p.sigma for p in params.PARAMS])
        self.lower = np.log([p.lower for p in params.PARAMS])
        self.upper = np.log([p.upper for p in params.PARAMS])

    def consts(self, x: np.ndarray) -> Constants:
        return params.constants_of(np.exp(x), opencl_priors())

    def residuals(self, x: np.ndarray, train: np.ndarray) -> np.ndarray:
        p = self.predictor(self.consts(x))
        step = np.log(p.step_s[train] / self.measured[train])
        res_rows = train & ~np.isnan(self.res)
        res = RSS_WEIGHT * np.log(p.rss_mb[res_rows] / self.res[res_rows])
        util_rows = train & ~np.isnan(self.util)
        util = UTIL_WEIGHT * np.log(p.gpu_util[util_rows] / self.util[util_rows])
        prior = (x - self.centre) / self.sigma
        return np.concatenate([step, res, util, prior])

    def fit(self, train: np.ndarray) -> np.ndarray:
        x0 = np.clip(self.centre, self.lower + 1e-9, self.upper - 1e-9)
        sol = least_squares(
            self.residuals, x0, bounds=(self.lower, self.upper), args=(train,), x_scale=1.0
        )
        return np.exp(sol.x)


def rounded(values: np.ndarray) -> np.ndarray:
    return np.array([float(f"{v:.5g}") for v in values])  # as written to YAML


def derive_opencl(values: np.ndarray) -> dict[str, float]:
    """The mobile-GPU (MNN OpenCL) stack from papers 003/001 and the fitted MNN CPU stack."""
    tree = params.tree_of(values, opencl_priors(), {})
    mnn = tree["cpu"]["mnn"]
    out = opencl_priors()
    out["gemm_eff"] = 55.0 / 898.5
    ratio = mnn["forward"]["depthwise_eff"] / mnn["forward"]["gemm_eff"]
    out["depthwise_eff"] = out["gemm_eff"] * ratio
    out["dispatch_kcycles"] = mnn["forward"]["dispatch_kcycles"]
    out["runtime_mb"] = mnn["runtime_mb"] + 40.0
    out["rss_per_tensor_byte"] = mnn["rss_per_tensor_byte"]
    # Solve the copies' efficiency for a 91% data-movement share (paper 003).
    consts = params.constants_of(values, out)
    w = opencl_reference_workload()
    profile = load_profile("meizu_16t")
    from fedbench.devices.cpu import place
    from fedbench.devices.knobs import Knobs

    rig = gpu_rig(profile, place(profile, Knobs(device="gpu"), consts, None), consts)
    table = lower_workload(w, "mnn_opencl")
    calls = gpu_call_seconds(table, rig, consts.gpu_framework("mnn_opencl"))
    compute = float((calls.total - calls.transfer).sum())
    at_full_speed = float(calls.transfer.sum())  # transfer seconds at copy_eff 1
    share = 0.91
    out["copy_eff"] = min(1.0, at_full_speed / (share / (1.0 - share) * compute))
    return {k: float(f"{v:.5g}") for k, v in out.items()}


def opencl_reference_workload() -> Workload:
    from fedbench.measure.workload import measure_workload
    from fedbench.models import build_model

    net, shape = build_model("mobilenetv2")
    return measure_workload(
        net, tuple(shape), 8, model_name="mobilenetv2", optimizer="sgd_momentum_wd"
    )


def fit_energy(
    rows: list[Row], loads: list[Workload], values: np.ndarray, train: np.ndarray
) -> np.ndarray:
    """The power model's factors on the energy rows among `train`, at these time constants."""
    t = energy.terms(rows, loads, params.constants_of(values, opencl_priors()))
    return energy.fit_scales(t, energy.measured(rows, t), train[t.index])


def cross_validate(
    objective: Objective, rows: list[Row], loads: list[Workload], log: bool = True
) -> dict[str, list[Fold]]:
    keys = {"lomo": [r.zoo_model for r in rows], "lodo": [r.device for r in rows]}
    folds: dict[str, list[Fold]] = {}
    for scheme in SCHEMES:
        folds[scheme] = []
        for held in sorted(set(keys[scheme])):
            train = np.array([k != held for k in keys[scheme]])
            t0 = time.perf_counter()
            values = objective.fit(train)
            scales = fit_energy(rows, loads, values, train)
            folds[scheme].append(Fold(scheme, held, values, time.perf_counter() - t0, scales))
            if log:
                print(f"  {scheme} without {held}: {folds[scheme][-1].seconds:.0f} s", flush=True)
    return folds


def out_of_fold(objective: Objective, rows: list[Row], folds: list[Fold], key: str) -> np.ndarray:
    """Each row's step time predicted by the fold that held it out."""
    pred = np.full(len(rows), np.nan)
    for fold in folds:
        p = objective.predictor(params.constants_of(fold.values, opencl_priors()))
        for i, r in enumerate(rows):
            if getattr(r, key) == fold.held_out:
                pred[i] = p.step_s[i]
    return pred


def write_constants(
    values: np.ndarray, opencl: dict[str, float], meta: dict[str, str], scales: np.ndarray
) -> None:
    header = (
        "# Fitted emulator constants: written by `python calibration/fit.py`, read by\n"
        "# fedbench.devices.constants. See calibration/report.md for the fit, its\n"
        "# cross-validated errors and which rows identify each constant.\n"
    )
    body = yaml.safe_dump(params.tree_of(values, opencl, meta, scales), sort_keys=False)
    FITTED_FILE.write_text(header + body)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    parser.add_argument(
        "--no-cv", action="store_true", help="skip cross-validation (report keeps no OOF figures)"
    )
    parser.add_argument(
        "--host-only",
        action="store_true",
        help="only refresh report.md's host section from benchmarks/results "
        "(after python benchmarks/profile_device.py); fits nothing",
    )
    args = parser.parse_args(argv)
    if args.host_only:
        import report

        report.refresh_host(ROOT / "calibration" / "report.md")
        print("refreshed the host section of calibration/report.md")
        return 0
    import torch

    torch.set_num_threads(1)
    rows = load_rows(args.csv)
    loads = [workload(r) for r in rows]
    objective = Objective(rows, Predictor(rows, loads))
    every = np.ones(len(rows), bool)
    t0 = time.perf_counter()
    values = rounded(objective.fit(every))
    print(f"fit on all {len(rows)} rows: {time.perf_counter() - t0:.0f} s", flush=True)
    opencl = derive_opencl(values)
    scales = energy.rounded(fit_energy(rows, loads, values, every))
    folds = {} if args.no_cv else cross_validate(objective, rows, loads)

    import report

    result = report.build(rows, loads, objective, values, opencl, scales, folds)
    meta = {
        "generated_by": "calibration/fit.py (do not edit by hand)",
        "data": f"calibration/data/{args.csv.name}: {len(rows)} rows",
        "method": "least squares on log step time (+ MNN resident sets, TX2 GPU utilisation), "
        "log-normal priors; cross-validated leaving one model / one device out",
        "latency_mape_in_sample_pct": f"{result.mape['in_sample']:.1f}",
        "latency_mape_lomo_pct": f"{result.mape.get('lomo', math.nan):.1f}",
        "latency_mape_lodo_pct": f"{result.mape.get('lodo', math.nan):.1f}",
        "energy_mape_in_sample_pct": f"{result.energy_mape['in_sample']:.1f}",
        "energy_mape_lomo_pct": f"{result.energy_mape.get('lomo', math.nan):.1f}",
        "energy_mape_lodo_pct": f"{result.energy_mape.get('lodo', math.nan):.1f}",
        "power_mape_in_sample_pct": f"{result.power_mape['in_sample']:.1f}",
        "power_mape_lomo_pct": f"{result.power_mape.get('lomo', math.nan):.1f}",
        "power_mape_lodo_pct": f"{result.power_mape.get('lodo', math.nan):.1f}",
        "report": "calibration/report.md",
    }
    write_constants(values, opencl, meta, scales)
    report.write(result, ROOT / "calibration")
    print(result.summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
