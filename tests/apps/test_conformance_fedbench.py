"""The conformance apps under fedbench: the app's own ServerApp loop on the fleet Grid.

With every device picked every round on host devices (fleet=host3, three a
round, the apps' three nodes), each app's own results.json - written by its
ServerApp into the run folder - holds the same per-round train, evaluation and
central metrics as under plain Flower's simulation, to the last digit: five
apps in simulation (central and federated evaluation, SecAgg+ with DP, the
legacy `server_fn`, a strategy overriding `start()` with its own lr schedule,
and stateful clients), and one (central and federated evaluation) in a
deployment on loopback, one SuperNode per host device. Every such app is
deterministic: seeded model and batches, one torch thread, and a server that
aggregates the replies in partition-id order, not arrival order. Each
fedbench run takes about 45 s and its reference run about 30 s on a 2-core
host, so these are `slow`; the reference runs are the session's, shared with
test_conformance_reference.py (tests/apps/conftest.py).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apps.conformance.reference import SECTIONS, read_app, shared_reference
from tests.helpers import run_fedbench

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parent / "conformance"
EQUAL = (
    "central_and_federated_eval",
    "secagg_dp",
    "legacy_server_fn",
    "custom_start",
    "stateful",
)
# The app run in a deployment too: the cheapest with train, evaluate and central rounds.
DEPLOYED = "central_and_federated_eval"


class FedbenchRuns:
    def __init__(self, base: Path) -> None:
        self.base = base
        self._runs: dict[tuple[str, str], tuple[Path, str]] = {}

    def get(self, app: str, runtime: str = "simulation") -> tuple[Path, str]:
        """(the run folder, the console) of `app` under fedbench, made on first use: every
        device of a host fleet picked every round, in `runtime`."""
        if (app, runtime) not in self._runs:
            nodes = read_app(app).num_supernodes
            run = self.base / f"{app}-{runtime}"
            proc = run_fedbench(
                [
                    f"app={ROOT / app}",
                    f"fleet=host{nodes}",
                    f"strategy.clients_per_round={nodes}",
                    "scenario=rounds",
                    "scenario.rounds=3",
                    f"runtime={runtime}",
                ],
                run,
                timeout=600,
            )
            assert proc.returncode == 0, proc.stderr[-3000:]
            self._runs[app, runtime] = (run, proc.stdout + proc.stderr)
        return self._runs[app, runtime]


class References:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, app: str) -> dict[str, Any]:
        """`app` under plain Flower's simulation (run_reference), made on first use in the
        session: test_conformance_reference.py checks the same run (shared_reference)."""
        return shared_reference(app, 1, self.folder)


@pytest.fixture(scope="module")
def fedbench_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FedbenchRuns]:
    yield FedbenchRuns(tmp_path_factory.mktemp("fedbench-apps"))


@pytest.fixture(scope="module")
def references(reference_runs_folder: Path) -> Iterator[References]:
    yield References(reference_runs_folder)


def _sections(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s: {str(r): m for r, m in doc.get(s, {}).items()} for s in SECTIONS}


def _assert_equal(run: Path, reference: dict[str, Any]) -> None:
    """results.json of the fedbench run holds the reference's per-round sections, and its
    `extra` (final model's sha256, lr schedule, each client's own metrics) as well."""
    doc = json.loads((run / "results.json").read_text())
    mine = _sections(doc)
    assert mine == _sections(reference)
    assert all(mine[s] for s in ("train", "central")), mine  # the app measured something
    assert doc["extra"] == reference["extra"]


@pytest.mark.parametrize("app", EQUAL)
def test_metrics_equal_plain_flowers_to_the_last_digit(
    fedbench_runs: FedbenchRuns, references: References, app: str
) -> None:
    run, _ = fedbench_runs.get(app)
    _assert_equal(run, references.get(app))


def test_custom_starts_schedule_is_what_it_sent(fedbench_runs: FedbenchRuns) -> None:
    """The strategy's own start() loop ran under fedbench: its lr halves every round."""
    run, _ = fedbench_runs.get("custom_start")
    doc = json.loads((run / "results.json").read_text())
    assert doc["extra"]["lr-schedule"] == {"1": 0.2, "2": 0.1, "3": 0.05}
    assert sorted(doc["train"]) == ["1", "2", "3"]
    assert sorted(doc["central"]) == ["0", "1", "2", "3"]


def test_metrics_equal_plain_flowers_in_a_deployment_on_loopback(
    fedbench_runs: FedbenchRuns, references: References
) -> None:
    """The same app under `runtime=deployment`: a real SuperLink, one SuperNode per host
    device, the app as a bundle; every round's metrics equal plain Flower's simulation."""
    run, _ = fedbench_runs.get(DEPLOYED, "deployment")
    _assert_equal(run, references.get(DEPLOYED))
    rows = list(csv.DictReader((run / "rounds.csv").open()))
    assert len(rows) == 9 and {r["status"] for r in rows} == {"ok"}


def test_secagg_and_dp_were_active_under_fedbench(fedbench_runs: FedbenchRuns) -> None:
    run, _ = fedbench_runs.get("secagg_dp")
    log = (run / "console.log").read_text() + (run / "flower.log").read_text()
    assert log.count("Secure aggregation completed.") == 3, log[-2000:]
    rows = list(csv.DictReader((run / "rounds.csv").open()))
    assert len(rows) == 9 and {r["status"] for r in rows} == {"ok"}
    # The clients' updates were masked (no ArrayRecord reached fedbench's checks).
    assert all("update not checked" in r["reason"] for r in rows)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final_accuracy"] > 0


def test_each_devices_context_state_stays_its_own(fedbench_runs: FedbenchRuns) -> None:
    """Three devices on pooled workers: each one's context.state counts its own rounds."""
    run, _ = fedbench_runs.get("stateful")
    clients = json.loads((run / "results.json").read_text())["extra"]["clients"]
    sums: dict[str, float] = {}
    for server_round in (1, 2, 3):
        replies = clients[str(server_round)]
        assert sorted(replies) == ["0", "1", "2"]
        for pid, metrics in replies.items():
            assert metrics["rounds-trained"] == server_round, (pid, server_round)
            sums[pid] = sums.get(pid, 0.0) + metrics["train_loss"]
            assert metrics["loss-sum"] == sums[pid]


def test_a_non_torch_app_is_costed_and_every_metric_it_returns_is_kept(tmp_path: Path) -> None:
    """The scikit-learn app on emulated phones: each round costs its CPU time (not the
    0.15 ms its no-op trace gave), and client_metrics.csv holds every number its train
    and evaluate replies returned, under the app's own names."""
    run = tmp_path / "sklearn"
    proc = run_fedbench(
        [
            f"app={ROOT / 'sklearn_app'}",
            "fleet.devices=[{profile:pixel2,count:3}]",
            "strategy.clients_per_round=3",
            "scenario=rounds",
            "scenario.rounds=2",
        ],
        run,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader((run / "rounds.csv").open()))
    assert len(rows) == 6 and {r["status"] for r in rows} == {"ok"}
    assert {r["cost_basis"] for r in rows} == {"cpu_time"}
    assert all(float(r["latency_s"]) > 1e-3 and float(r["energy_j"]) > 1e-3 for r in rows)
    metrics = list(csv.DictReader((run / "client_metrics.csv").open()))
    kept: dict[tuple[str, str, str], set[str]] = {}
    for m in metrics:
        kept.setdefault((m["round"], m["device"], m["message"]), set()).add(m["key"])
    devices = {r["device"] for r in rows}
    train = {"train_loss", "train_acc", "num-examples"}
    evaluate = {"eval_loss", "eval_acc", "num-examples"}
    expected = {(r, d, "train"): train for r in "12" for d in devices}
    expected |= {(r, d, "evaluate"): evaluate for r in "12" for d in devices}
    assert kept == expected
