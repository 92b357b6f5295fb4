"""calibration/report.md and report.csv: in-sample and out-of-fold errors of the fit, row by row."""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import energy
import numpy as np
import params
from rows import Row, mape

from fedbench.devices.constants import Constants
from fedbench.devices.emulator import emulate
from fedbench.devices.memory import MB, forward_output_bytes, forward_unfold_bytes
from fedbench.devices.profile import initial_state, load_profile
from fedbench.measure.workload import Workload

HOST_LOMO = (
    Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "profile_device_lomo.csv"
)
HOST_HEADING = "## Host: profile_device, leave one model out"
SCHEME_NAMES = {
    "in_sample": "in-sample",
    "lomo": "leave one model out",
    "lodo": "leave one device out",
}


@dataclass
class Result:
    rows: list[Row]
    records: list[dict[str, Any]]
    mape: dict[str, float]  # CPU rows, per scheme
    gpu_mape: dict[str, float]
    constants: Constants
    values: np.ndarray
    opencl: dict[str, float]
    folds: Mapping[str, Sequence[Any]]
    baseline_mape: float
    scales: np.ndarray = field(default_factory=params.energy_guesses)
    energy_mape: dict[str, float] = field(default_factory=dict)  # energy rows, per scheme
    power_mape: dict[str, float] = field(default_factory=dict)  # the same rows' power
    checks: list[Any] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"{SCHEME_NAMES[k]} {v:.1f}%" for k, v in self.mape.items()]
        gpu = [f"{SCHEME_NAMES[k]} {v:.1f}%" for k, v in self.gpu_mape.items()]
        joules = [f"{SCHEME_NAMES[k]} {v:.1f}%" for k, v in self.energy_mape.items()]
        n = sum(1 for r in self.rows if r.knobs.device == "cpu")
        return (
            f"latency MAPE over {n} CPU rows: {', '.join(parts)}; "
            f"TX2 GPU rows: {', '.join(gpu)}; energy rows: {', '.join(joules)}; "
            "wrote calibration/report.md"
        )


def _err(pred: float, meas: float) -> float:
    return 100.0 * (pred - meas) / meas


def _baseline(rows: Sequence[Row]) -> float:
    """FedScale's device model: one seconds-per-sample figure per device, fitted in-sample."""
    errors = []
    for device in sorted({r.device for r in rows}):
        mine = [r for r in rows if r.device == device]
        # The per-device constant that minimises log error: geometric mean.
        rate = math.exp(np.mean([math.log(r.measured_s / r.batch) for r in mine]))
        errors += [_err(rate * r.batch, r.measured_s) for r in mine]
    return mape(errors)


def build(
    rows: Sequence[Row],
    loads: Sequence[Workload],
    objective: Any,
    values: np.ndarray,
    opencl: dict[str, float],
    scales: np.ndarray,
    folds: Mapping[str, Sequence[Any]],
) -> Result:
    import checks
    import fit

    consts = params.constants_of(values, opencl, scales)
    pred = objective.predictor(consts)
    oof = {s: fit.out_of_fold(objective, list(rows), list(f), _key(s)) for s, f in folds.items()}
    energy_oof = {s: _energy_out_of_fold(rows, loads, f, _key(s)) for s, f in folds.items()}
    records = []
    for i, (row, w) in enumerate(zip(rows, loads, strict=True)):
        profile = load_profile(row.device)
        e = emulate(profile, [(w, 1)], initial_state(profile, 0.0), row.knobs, consts)
        if not math.isclose(e.latency_s, pred.step_s[i], rel_tol=5e-3):
            raise AssertionError(
                f"row {i} ({row.device} {row.zoo_model} b{row.batch}): the fit's predictor says "
                f"{pred.step_s[i]:.4g} s, emulate() {e.latency_s:.4g} s"
            )
        rec = {
            "device": row.device,
            "model": row.model,
            "zoo_model": row.zoo_model,
            "processor": row.knobs.device,
            "framework": row.framework,
            "config": row.config,
            "input": "x".join(map(str, row.input_shape)),
            "batch": row.batch,
            "trainable": row.trainable,
            "optimizer": row.optimizer,
            "measured_ms": round(1000 * row.measured_s, 2),
            "predicted_ms": round(1000 * e.latency_s, 2),
            "error_pct": round(_err(e.latency_s, row.measured_s), 1),
        }
        for s, p in oof.items():
            rec[f"{s}_ms"] = round(1000 * p[i], 2)
            rec[f"{s}_error_pct"] = round(_err(p[i], row.measured_s), 1)
        rec |= {
            "measured_forward_ms": (
                None if row.forward_s is None else round(1000 * row.forward_s, 2)
            ),
            "predicted_forward_ms": None
            if row.forward_s is None
            else round(1000 * pred.forward_s[i], 2),
            "measured_res_mb": row.peak_res_mb,
            "predicted_rss_mb": round(e.rss_mb, 0),
            "saved_activation_mb": round(w.saved_activation_bytes / MB, 2),
            "forward_im2col_mb": round(forward_unfold_bytes(w) / MB, 2),
            "forward_outputs_mb": round(forward_output_bytes(w) / MB, 2),
            "predicted_swapped_mb": round(e.swapped_mb, 0),
            "measured_cpu_pct": row.cpu_pct,
            "predicted_busy_cores": round(e.busy_cores, 2),
            "predicted_clock_ghz": round(e.freq_ghz_avg, 2),
            "predicted_power_w": round(e.avg_power_w, 2),
            "measured_gpu_util": row.gpu_util,
            "predicted_gpu_util": None
            if row.knobs.device != "gpu"
            else round(float(pred.gpu_util[i]), 3),
        }
        rec |= _energy_record(row, e, {s: (j[i], t[i]) for s, (j, t) in energy_oof.items()})
        records.append(rec)
    schemes = ["in_sample", *folds]
    column = {"in_sample": "error_pct", **{s: f"{s}_error_pct" for s in folds}}

    def scheme_mape(processor: str) -> dict[str, float]:
        chosen = [r for r in records if r["processor"] == processor]
        return {s: mape([r[column[s]] for r in chosen]) for s in schemes}

    metered = [r for r in records if r["measured_energy_j"] is not None]
    energy_column = {"in_sample": "energy_error_pct", **{s: f"{s}_energy_error_pct" for s in folds}}
    power_column = {"in_sample": "power_error_pct", **{s: f"{s}_power_error_pct" for s in folds}}
    result = Result(
        rows=list(rows),
        records=records,
        mape=scheme_mape("cpu"),
        gpu_mape=scheme_mape("gpu"),
        constants=consts,
        values=values,
        opencl=opencl,
        folds=folds,
        baseline_mape=_baseline([r for r in rows if r.knobs.device == "cpu"]),
        scales=scales,
        energy_mape={s: mape([r[energy_column[s]] for r in metered]) for s in schemes},
        power_mape={s: mape([r[power_column[s]] for r in metered]) for s in schemes},
    )
    result.checks = checks.run_all(consts)
    return result


def _energy_out_of_fold(
    rows: Sequence[Row], loads: Sequence[Workload], folds: Sequence[Any], key: str
) -> tuple[np.ndarray, np.ndarray]:
    """Each energy row's energy above idle and step time, predicted by the fold that held it out."""
    import fit

    joules, seconds = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    held = {getattr(rows[i], key) for i in energy.energy_rows(rows)}
    for fold in folds:
        if fold.held_out not in held:
            continue
        t = energy.terms(rows, loads, params.constants_of(fold.values, fit.opencl_priors()))
        fold_j = t.energy_j(fold.energy)
        for k, i in enumerate(t.index):
            if getattr(rows[i], key) == fold.held_out:
                joules[i], seconds[i] = fold_j[k], t.seconds[k]
    return joules, seconds


def _energy_record(row: Row, e: Any, oof: dict[str, tuple[float, float]]) -> dict[str, Any]:
    """The energy columns of one row's record (None where the row has no power measurement)."""
    measured = row.energy_j
    keys = ["measured_energy_j", "predicted_energy_j", "energy_error_pct"]
    keys += ["measured_power_above_idle_w", "predicted_power_above_idle_w", "power_error_pct"]
    keys += [f"{s}_{k}" for s in oof for k in ("energy_j", "energy_error_pct", "power_error_pct")]
    if measured is None or row.power_w is None or row.idle_w is None:
        return dict.fromkeys(keys)
    above = e.energy_j - e.energy_terms_j["idle"]
    watts = row.power_w - row.idle_w
    out: dict[str, Any] = {
        "measured_energy_j": round(measured, 4),
        "predicted_energy_j": round(above, 4),
        "energy_error_pct": round(_err(above, measured), 1),
        "measured_power_above_idle_w": round(watts, 3),
        "predicted_power_above_idle_w": round(above / e.latency_s, 3),
        "power_error_pct": round(_err(above / e.latency_s, watts), 1),
    }
    for s, (joules, seconds) in oof.items():
        out[f"{s}_energy_j"] = round(float(joules), 4)
        out[f"{s}_energy_error_pct"] = round(_err(float(joules), measured), 1)
        out[f"{s}_power_error_pct"] = round(_err(float(joules / seconds), watts), 1)
    return out


def _key(scheme: str) -> str:
    return {"lomo": "zoo_model", "lodo": "device"}[scheme]


def _md_table(header: Sequence[str], body: Sequence[Sequence[Any]]) -> list[str]:
    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        return str(v)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in body]
    return lines


def _group_table(
    result: Result, key: str, label: str, keep: Callable[[dict[str, Any]], bool]
) -> list[str]:
    schemes = ["in_sample", *result.folds]
    column = {"in_sample": "error_pct", **{s: f"{s}_error_pct" for s in result.folds}}
    body = []
    for value in sorted({r[key] for r in result.records if keep(r)}):
        mine = [r for r in result.records if r[key] == value and keep(r)]
        body.append(
            [value, len(mine)]
            + [f"{mape([r[column[s]] for r in mine]):.1f}" for s in schemes]
            + [f"{max(abs(r[column[s]]) for r in mine):.0f}" for s in schemes[-1:]]
        )
    header = [label, "rows", *(SCHEME_NAMES[s] + " MAPE %" for s in schemes)]
    return _md_table(header + [f"max abs error % ({SCHEME_NAMES[schemes[-1]]})"], body)


def _constants_table(result: Result) -> list[str]:
    body = []
    for i, p in enumerate(params.PARAMS):
        spread = ""
        per_fold = [f.values[i] for fs in result.folds.values() for f in fs]
        if per_fold:
            spread = f"{min(per_fold):.3g} - {max(per_fold):.3g}"
        moved = abs(math.log(result.values[i] / p.guess))
        note = "at its prior: not identified by the rows" if moved < 0.05 else ""
        value = f"{result.values[i]:.4g}"
        body.append([p.path, value, f"{p.guess:g}", spread, p.identified_by, note])
    return _md_table(
        ["constant", "fitted", "prior centre", "range over CV folds", "identified by", "note"],
        body,
    )


def _energy_group_table(result: Result) -> list[str]:
    metered = [r for r in result.records if r["measured_energy_j"] is not None]
    schemes = ["in_sample", *result.folds]
    column = {"in_sample": "energy_error_pct", **{s: f"{s}_energy_error_pct" for s in result.folds}}
    body = []
    for model in sorted({r["zoo_model"] for r in metered}):
        mine = [r for r in metered if r["zoo_model"] == model]
        body.append(
            [model, len(mine)]
            + [f"{mape([r[column[s]] for r in mine]):.1f}" for s in schemes]
            + [f"{mape([r['power_error_pct'] for r in mine]):.1f}"]
            + [f"{mape([r[f'{s}_power_error_pct'] for r in mine]):.1f}" for s in result.folds]
        )
    header = ["zoo model", "rows", *(SCHEME_NAMES[s] + " energy MAPE %" for s in schemes)]
    header += [SCHEME_NAMES[s] + " power MAPE %" for s in schemes]
    return ["", "### Energy per model", "", *_md_table(header, body)]


def _energy_constants_table(result: Result) -> list[str]:
    spread: dict[int, str] = {}
    for k in range(len(params.ENERGY_PARAMS)):
        per_fold = [f.energy[k] for fs in result.folds.values() for f in fs]
        if per_fold:
            spread[k] = f"{min(per_fold):.3g} - {max(per_fold):.3g}"
    body = [
        [p.path, f"{result.scales[k]:.4g}", f"{p.guess:g}", spread.get(k, ""), p.identified_by]
        for k, p in enumerate(params.ENERGY_PARAMS)
    ]
    return _md_table(
        ["constant", "fitted", "prior centre", "range over CV folds", "identified by"], body
    )


def write(result: Result, out_dir: Path) -> None:
    records = result.records
    with (out_dir / "report.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    (out_dir / "report.md").write_text("\n".join(_lines(result)) + "\n")


def _lines(result: Result) -> list[str]:
    import report_text

    cpu = lambda r: r["processor"] == "cpu"  # noqa: E731
    gpu = lambda r: r["processor"] == "gpu"  # noqa: E731
    n_cpu = sum(1 for r in result.records if cpu(r))
    lines = report_text.intro(result, n_cpu)
    lines += ["", "### Per device (CPU rows)", ""]
    lines += _group_table(result, "device", "device", cpu)
    lines += ["", "### Per model (CPU rows)", ""]
    lines += _group_table(result, "zoo_model", "zoo model", cpu)
    lines += ["", "### GPU rows (Jetson TX2, TensorFlow)", ""]
    lines += _group_table(result, "zoo_model", "zoo model", gpu)
    lines += report_text.gpu_note()
    lines += report_text.energy_section(result)
    lines += _energy_group_table(result)
    lines += ["", HOST_HEADING, ""]
    lines += report_text.host_lomo(HOST_LOMO)
    lines += ["", "## Fitted constants", ""]
    lines += _constants_table(result)
    lines += ["", "Power model (fitted after the time constants to the energy rows):", ""]
    lines += _energy_constants_table(result)
    lines += ["", "Fixed, not fitted (no published row identifies them):", ""]
    lines += _md_table(
        ["constant", "value", "source"], [[k, f"{v:g}", s] for k, (v, s) in params.FIXED.items()]
    )
    lines += ["", "Mobile GPU (MNN OpenCL) stack, set from papers 001/003, not fitted:", ""]
    lines += _md_table(
        ["constant", "value", "source"],
        [
            [f"gpu.mnn_opencl.{k}", f"{v:g}", params.MNN_OPENCL_SOURCES[k]]
            for k, v in result.opencl.items()
        ],
    )
    lines += report_text.arch_note(result.constants)
    lines += ["", "## Rows", ""]
    lines += report_text.rows_table(result)
    lines += report_text.memory_section(result)
    lines += ["", "## Out-of-sample checks: the papers' other figures (not fitted)", ""]
    lines += _md_table(
        ["check", "source", "published", "predicted", "note"],
        [[c.name, c.source, c.published, c.predicted, c.note] for c in result.checks],
    )
    lines += report_text.known_gaps(result)
    return lines


def refresh_host(report_md: Path) -> None:
    """Rewrite only the host section of report.md from HOST_LOMO (after
    `python benchmarks/profile_device.py`), leaving the fit's sections as they are."""
    import report_text

    text = report_md.read_text().split("\n")
    start = text.index(HOST_HEADING)
    end = next(i for i in range(start + 1, len(text)) if text[i].startswith("## "))
    body = ["", *report_text.host_lomo(HOST_LOMO), ""]
    report_md.write_text("\n".join([*text[: start + 1], *body, *text[end:]]))
