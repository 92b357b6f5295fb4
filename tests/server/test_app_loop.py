"""The pieces of a user app's run that need no runtime (fedbench.server.app_loop, capture).

The runs themselves, on a fleet Grid against plain Flower, are in
tests/apps/test_conformance_fedbench.py (slow).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from flwr.app import ConfigRecord, MetricRecord, RecordDict

from fedbench.errors import FedbenchError
from fedbench.experiment.app import AppConfig, load_app
from fedbench.server.app_loop import _averaged, _weigh
from fedbench.server.capture import Asks, first_send
from fedbench.server.fleet_strategy import _device_and_name
from tests.helpers import task_identity

CONFORMANCE = Path(__file__).parents[1] / "apps" / "conformance"


def test_preflight_of_a_legacy_app_leaves_the_working_directory_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A legacy app goes on past its first (failed) send and writes results.json; that
    file goes to a scratch folder, not the user's working directory."""
    task_identity()
    monkeypatch.chdir(tmp_path)
    messages = first_send(load_app(str(CONFORMANCE / "legacy_server_fn"), {}), num_devices=3)
    assert messages and messages[0].metadata.message_type == "train"
    assert list(tmp_path.iterdir()) == [] and Path.cwd() == tmp_path


def test_an_apps_exception_names_its_file_and_line(tmp_path: Path) -> None:
    task_identity()
    (tmp_path / "bad_server.py").write_text(
        "from flwr.serverapp import ServerApp\n"
        "app = ServerApp()\n"
        "@app.main()\n"
        "def main(grid, context):\n"
        "    raise ValueError('no data here')\n"
    )
    app = AppConfig(root=str(tmp_path), clientapp="x:app", serverapp="bad_server:app", name="b")
    with pytest.raises(FedbenchError) as caught:
        first_send(app, 3)
    assert str(caught.value) == (
        "app b: its ServerApp 'bad_server:app' raised ValueError at bad_server.py:5: no data here"
    )


def test_evaluation_replies_are_weighted_by_their_examples_in_either_layout() -> None:
    totals: dict[str, float] = {}
    # The Message API's layout, and Flower's legacy EvaluateRes records.
    _weigh(totals, RecordDict({"metrics": MetricRecord({"num-examples": 1, "acc": 1.0})}))
    _weigh(
        totals,
        RecordDict(
            {
                "evaluateres.num_examples": MetricRecord({"num_examples": 3}),
                "evaluateres.metrics": ConfigRecord({"acc": 0.0}),
            }
        ),
    )
    _weigh(totals, RecordDict({"metrics": MetricRecord({"acc": 0.5})}))  # no count: left out
    assert _averaged(totals) == {"acc": 0.25, "num_examples": 4.0}


def test_a_several_device_replys_records_are_told_apart_by_device() -> None:
    assert _device_and_name("2:fedbench-context/x", [2, 5]) == (2, "fedbench-context/x")
    assert _device_and_name("a:b", [7]) == (7, "a:b")  # one device: the key is the app's


def test_asks_are_a_wait_only_when_many_and_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr("fedbench.server.capture.time.monotonic", lambda: clock[0])
    asks = Asks()
    assert not any(asks.wait() for _ in range(20))  # Flower's legacy layer: many, quick
    asks.reset()
    waited = []
    for _ in range(10):  # sample_nodes: once a second
        waited.append(asks.wait())
        clock[0] += 1.0
    assert waited.index(True) == 8


def test_an_app_run_refuses_algorithm_and_resume(tmp_path: Path) -> None:
    """The app's own strategy aggregates and its loop starts from its own beginning."""
    from fedbench.experiment.config_file import config_yaml
    from tests.cli_runner import Command, run_commands
    from tests.test_compose import typed

    app = CONFORMANCE / "central_and_federated_eval"
    folder = tmp_path / "earlier"
    folder.mkdir()
    (folder / "config.yaml").write_text(config_yaml(typed([f"app={app}", f"+output_dir={folder}"])))
    fresh = tmp_path / "fresh"
    commands = [
        Command("fedbench", (f"app={app}", "algorithm=fedprox", f"hydra.run.dir={fresh}"), "/"),
        Command(
            "fedbench",
            (f"resume={folder}", "allow_targets=[two_eval_app.client_app,two_eval_app.server_app]"),
            str(tmp_path),
        ),
    ]
    refused, resumed = run_commands(commands, timeout_s=90)
    assert refused.code == 2 and "aggregates with the strategy its own ServerApp" in refused.stderr
    assert not fresh.exists()
    assert resumed.code == 2 and "fedbench cannot continue it mid-way" in resumed.stderr
