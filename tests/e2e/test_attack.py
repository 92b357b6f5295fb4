"""A whole run with one hostile device: every attack recorded, accuracy as without it.

The server is fedbench's own (`run_server`: real model, data, evaluation,
run folder); the grid delivers each train message to fedbench's real
ClientApp in this process (tests/server/fakes.py's FakeGrid), so the
honest devices really train. One device is an attacker: each round it
takes its honest reply and replaces it with the next attack of the issue's
list. The run completes, every attack is in rounds.csv with its reason, and
the final accuracy is within 2 points of the same run without the attacker
(its device then replies honestly). Without the defense the first attack
alone ruins the model, so the comparison can fail.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, Message, MetricRecord, RecordDict

from fedbench.core.records import from_record, to_record
from fedbench.experiment.compose import compose_experiment
from fedbench.protocol import REPORT, TASK, tasks_from
from fedbench.server.app import run_server
from tests.helpers import run_client, task_identity
from tests.server.fakes import FakeGrid

pytestmark = pytest.mark.slow

Attack = Callable[[RecordDict], RecordDict]
ATTACKER = "rpi4-001"


def _arrays(content: RecordDict, fn: Callable[[np.ndarray], np.ndarray]) -> RecordDict:
    arrays = content.array_records["arrays"]
    content["arrays"] = ArrayRecord(
        {k: torch.from_numpy(np.array(fn(v.numpy()), order="C")) for k, v in arrays.items()}
    )
    return content


def _metric(content: RecordDict, **values: float) -> RecordDict:
    content["metrics"] = MetricRecord({**dict(content.metric_records["metrics"]), **values})
    return content


def _report(content: RecordDict, **values: float) -> RecordDict:
    report = from_record(content.config_records[REPORT])
    content[REPORT] = to_record(replace(report, **values))  # type: ignore[arg-type]
    return content


def _extra_records(content: RecordDict) -> RecordDict:
    out = RecordDict({"aaa": MetricRecord({"num-examples": 1e9})})  # before `metrics`
    out["arrays"] = content.array_records["arrays"]
    out["zzz"] = ArrayRecord(
        {k: torch.full(tuple(v.shape), 1e6) for k, v in content.array_records["arrays"].items()}
    )
    out["metrics"] = content.metric_records["metrics"]
    out[REPORT] = content.config_records[REPORT]
    return out


def _no_num_examples(content: RecordDict) -> RecordDict:
    content["metrics"] = MetricRecord({"train_loss": 0.1})
    return content


def _float_kind(v: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    return fn(v) if v.dtype.kind == "f" else v


# (what the attack is, how the reply is changed, the reason its row must give)
ATTACKS: list[tuple[str, Attack, str]] = [
    (
        "huge finite values",
        lambda c: _arrays(
            c,
            lambda v: _float_kind(v, lambda a: np.full_like(a, 3e38)),
        ),
        "refused: update distance",
    ),
    (
        "weights x1e4, 1e9 examples",
        lambda c: _metric(
            _arrays(c, lambda v: _float_kind(v, lambda a: a * 1e4)), **{"num-examples": 1e9}
        ),
        "'num-examples'=1e+09 exceeds",
    ),
    (
        "negative num-examples",
        lambda c: _metric(c, **{"num-examples": -50}),
        "is not a positive integer",
    ),
    (
        "int64 arrays",
        lambda c: _arrays(c, lambda v: (v * 1000).astype(np.int64)),
        "is int64, the global model's is float32",
    ),
    (
        "float64 arrays",
        lambda c: _arrays(c, lambda v: _float_kind(v, lambda a: a.astype(np.float64))),
        "",
    ),
    ("extra records", _extra_records, "ignored extra record(s) ['zzz', 'aaa']"),
    ("ok without num-examples", _no_num_examples, "no 'num-examples' metric"),
    (
        "round trip 1e12 s",
        lambda c: _report(c, round_trip_s=1e12),
        "cost report refused: round_trip_s=1e+12 outside",
    ),
    (
        "energy -1e9 J, battery 250%",
        lambda c: _report(c, energy_j=-1e9, battery_pct=250.0),
        "energy_j=-1e+09 outside",
    ),
]


class Devices:
    """fedbench's ClientApp for every device; the attacker's reply replaced by round."""

    def __init__(self, attacker: str | None, attacks: list[tuple[str, Attack, str]]) -> None:
        self.attacker = attacker
        self.attacks = attacks

    def device(self, name: str) -> Callable[[Message], RecordDict]:
        def reply(msg: Message) -> RecordDict:
            (task,) = tasks_from(msg.content.config_records[TASK])
            out = run_client(msg).content
            task_identity()  # the client's run restored the process's identity
            if name == self.attacker:
                out = self.attacks[(task.round - 1) % len(self.attacks)][1](out)
            return out

        return reply


def _run(
    tmp: Path, attacker: str | None, attacks: list[tuple[str, Attack, str]], *extra: str
) -> tuple[dict, list[dict[str, str]]]:
    experiment = compose_experiment(
        [
            "experiment=smoke",
            "fleet.devices=[{profile:rpi4,count:2},{profile:pixel2,count:2}]",
            "strategy.clients_per_round=4",
            f"scenario.days={len(attacks)}",
            "scenario.new_samples_per_day=24",
            "seed=3",
            "report.plots=false",
            *extra,
        ]
    )
    run_dir = tmp / ("attacked" if attacker else "clean")
    experiment = replace(experiment, output_dir=str(run_dir))
    names = ["rpi4-000", "rpi4-001", "pixel2-000", "pixel2-001"]
    devices = Devices(attacker, attacks)
    task_identity()
    grid = FakeGrid({n: devices.device(n) for n in names}, nodes=range(1, 5))
    run_server(grid, experiment, run_dir)
    summary = json.loads((run_dir / "summary.json").read_text())
    rows = list(csv.DictReader((run_dir / "rounds.csv").open()))
    return summary, rows


def test_every_attack_is_refused_and_accuracy_holds(tmp_path: Path) -> None:
    clean, _ = _run(tmp_path, None, ATTACKS)
    attacked, rows = _run(tmp_path, ATTACKER, ATTACKS)
    assert attacked["status"] == "completed" and clean["status"] == "completed"
    assert attacked["rounds_without_update"] == []
    mine = {int(r["round"]): r for r in rows if r["device"] == ATTACKER}
    for number, (what, _, reason) in enumerate(ATTACKS, 1):
        assert reason in mine[number]["reason"], (what, mine[number])
    assert mine[5]["status"] == "ok"  # float64: cast to float32 and averaged in
    assert mine[8]["round_trip_s"] == "" and mine[9]["energy_j"] == ""  # blanked, not summed
    assert attacked["totals"]["energy_j"] > 0
    assert attacked["totals"]["virtual_time_s"] < 30 * 86_400  # the 1e12 s never counted
    assert abs(attacked["final_accuracy"] - clean["final_accuracy"]) <= 0.02, (
        attacked["final_accuracy"],
        clean["final_accuracy"],
    )
    print(
        f"final accuracy: clean {clean['final_accuracy']:.4f}, "
        f"attacked {attacked['final_accuracy']:.4f}"
    )


def test_without_the_defense_the_first_attack_ruins_the_model(tmp_path: Path) -> None:
    """The comparison above can fail: the same attacker, the norm bound off."""
    clean, _ = _run(tmp_path, None, ATTACKS[:1], "defense.max_norm_ratio=null")
    attacked, rows = _run(tmp_path, ATTACKER, ATTACKS[:1], "defense.max_norm_ratio=null")
    assert all(r["status"] == "ok" for r in rows)  # nothing refused the huge values
    ruined = attacked["final_accuracy"]
    assert ruined is None or not ruined >= clean["final_accuracy"] - 0.2, (ruined, clean)
