"""The conformance apps under plain Flower: they complete, produce the metrics they
should, and repeat to the last digit (what the later fedbench-vs-Flower equality needs).

Each app runs under Flower's Ray simulation (about 30 s each on a 2-core host,
mostly Ray and its actors starting), so only one app's run is in the fast tier;
the other apps and the repeat runs (two apps, REPEATED) are `slow`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.apps.conformance.reference import APPS, SECTIONS, load_component, read_app

# The digits MLP apps' and the sklearn app's metric names, per section.
TRAIN = {"train_loss", "train_acc"}
EVALUATE = {"eval_loss", "eval_acc"}
CENTRAL = {"central_loss", "central_acc"}
EXPECTED: dict[str, dict[str, set[str]]] = {
    "legacy_server_fn": {"train": TRAIN, "evaluate": EVALUATE, "central": CENTRAL},
    "secagg_dp": {"train": TRAIN | {"update-norm"}, "evaluate": EVALUATE, "central": CENTRAL},
    "custom_start": {"train": TRAIN, "central": CENTRAL},
    "stateful": {"train": TRAIN | {"rounds-trained", "loss-sum"}, "central": CENTRAL},
    "central_and_federated_eval": {"train": TRAIN, "evaluate": EVALUATE, "central": CENTRAL},
    "sklearn_app": {"train": TRAIN, "evaluate": EVALUATE, "central": CENTRAL},
}
FAST_APP = "central_and_federated_eval"
SLOW = pytest.mark.slow


def _app_params() -> list[Any]:
    return [pytest.param(app, marks=() if app == FAST_APP else SLOW) for app in APPS]


class Runs:
    """Each app's reference runs, made on first use: run 1 for the checks, run 2 to repeat.

    Run 1 is the session's (shared_reference): test_conformance_fedbench.py compares
    fedbench with the same run, made by whichever module asks first.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, app: str, attempt: int = 1) -> dict[str, Any]:
        from tests.apps.conformance.reference import shared_reference

        return shared_reference(app, attempt, self.folder)


@pytest.fixture(scope="module")
def runs(reference_runs_folder: Path) -> Iterator[Runs]:
    yield Runs(reference_runs_folder)
    import ray

    assert not ray.is_initialized(), "a reference run left Ray running"


@pytest.mark.parametrize("app", APPS)
def test_app_components_load(app: str) -> None:
    """Every app's pyproject names a ServerApp and a ClientApp that import (no Ray)."""
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp

    from tests.apps.conformance.reference import importable

    spec = read_app(app)
    with importable(spec.root):
        assert isinstance(load_component(spec.serverapp, ServerApp), ServerApp)
        assert isinstance(load_component(spec.clientapp, ClientApp), ClientApp)
    assert str(spec.root) not in __import__("sys").path


@pytest.mark.parametrize("app", _app_params())
def test_metrics_per_round(runs: Runs, app: str) -> None:
    """One entry per round in each section the app fills, with the app's metric names."""
    result = runs.get(app)
    rounds = list(range(1, result["num-server-rounds"] + 1))
    for section in SECTIONS:
        names = EXPECTED[app].get(section)
        if names is None:
            assert result[section] == {}, f"{app} has no {section} metrics"
            continue
        expected_rounds = [0, *rounds] if section == "central" else rounds
        assert sorted(result[section]) == expected_rounds, section
        for server_round, metrics in result[section].items():
            assert names <= set(metrics), (section, server_round, sorted(metrics))
            assert all(math.isfinite(float(v)) for v in metrics.values())


@pytest.mark.slow
def test_stateful_state_stays_with_its_client(runs: Runs) -> None:
    """Each client's context.state counts its own rounds and sums its own losses."""
    result = runs.get("stateful")
    clients = result["extra"]["clients"]
    loss_sums: dict[str, float] = {}
    for server_round in range(1, result["num-server-rounds"] + 1):
        replies = clients[str(server_round)]
        assert sorted(replies) == [str(p) for p in range(result["nodes"])]
        for pid, metrics in replies.items():
            assert metrics["rounds-trained"] == server_round, (pid, server_round)
            loss_sums[pid] = loss_sums.get(pid, 0.0) + metrics["train_loss"]
            assert metrics["loss-sum"] == loss_sums[pid], (pid, server_round)


@pytest.mark.slow
def test_secagg_dp_used_secagg_and_clipping(runs: Runs) -> None:
    """The SecAgg+ workflow ran each round, and clipping bounded the aggregate update."""
    result = runs.get("secagg_dp")
    log = result["log"]
    assert log.count("Secure aggregation commencing.") == result["num-server-rounds"]
    assert log.count("Secure aggregation completed.") == result["num-server-rounds"]
    assert any("central DP noise" in line for line in log)
    clip = result["extra"]["clipping-norm"]
    for server_round, norm in result["extra"]["aggregate-update-norm"].items():
        # Clients' own updates are larger than the clipping norm, so the mod had work
        # to do; the mean of clipped updates (plus quantization error) stays within it.
        assert result["train"][int(server_round)]["update-norm"] > clip
        assert norm <= clip * 1.001, (server_round, norm)


@pytest.mark.slow
def test_custom_start_sends_its_schedule(runs: Runs) -> None:
    """The overridden start() halves the learning rate each round and wrote results.json."""
    schedule = runs.get("custom_start")["extra"]["lr-schedule"]
    assert schedule == {"1": 0.2, "2": 0.1, "3": 0.05}


# Repeated in CI: the app whose randomness takes seeding (SecAgg+'s rounding, DP noise)
# and the legacy path. Every app repeats (`python -m tests.apps.conformance.reference`
# twice); a repeat of all six would add two minutes to the slow tier.
REPEATED = ("secagg_dp", "legacy_server_fn")


@pytest.mark.parametrize("app", REPEATED)
@pytest.mark.slow
def test_metrics_repeat_to_the_last_digit(runs: Runs, app: str) -> None:
    """A second run gives identical metrics and the same final model digest."""
    first, second = runs.get(app), runs.get(app, attempt=2)
    for section in SECTIONS:
        assert first[section] == second[section], section
    assert first["extra"] == second["extra"]
