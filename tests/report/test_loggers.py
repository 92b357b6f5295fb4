"""report.loggers: rounds and evaluations written through TensorBoard's and MLflow's own
packages (the dev extra installs both), read back with the same packages."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from fedbench.errors import FedbenchError
from fedbench.report.loggers import (
    MlflowLogger,
    RunLogger,
    TensorBoardLogger,
    build_loggers,
    round_metrics,
)

ROWS = [
    {
        "round": 1,
        "day": 1,
        "device": "rpi4-000",
        "status": "ok",
        "energy_j": 2.5,
        "round_trip_s": 1.5,
        "temp_c_end": 48.0,
        "train_loss": 0.7,
    },
    {
        "round": 1,
        "day": 1,
        "device": "host-000",
        "status": "timeout",
        "energy_j": "",
        "round_trip_s": 4.0,
        "temp_c_end": "",
        "train_loss": "",
    },
]


def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "config.yaml").write_text(
        yaml.safe_dump({"name": "logged", "seed": 3, "train": {"lr": 0.01}})
    )
    return tmp_path


def test_round_metrics_leave_unknown_figures_out() -> None:
    metrics = round_metrics(ROWS)
    assert metrics["round/picked"] == 2 and metrics["round/ok"] == 1
    assert metrics["round/timeout"] == 1 and metrics["round/failed"] == 0
    assert metrics["round/energy_j"] == 2.5  # the host's empty cell is not 0 J
    assert metrics["round/slowest_round_trip_s"] == 4.0
    assert metrics["device/rpi4-000/temp_c_end"] == 48.0
    assert "device/host-000/energy_j" not in metrics


def test_tensorboard_writes_scalars_and_the_round_table(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (logger,) = build_loggers(["tensorboard"], run_dir(tmp_path))
    assert isinstance(logger, TensorBoardLogger)
    logger.log_round(1, 1, ROWS)
    logger.log_evaluation(1, 1, {"accuracy": 0.61, "loss": 1.2, "energy_j": float("nan")})
    logger.log_round(2, 2, ROWS[:1])
    logger.log_evaluation(2, 2, {"accuracy": 0.66})
    logger.close()
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    scalars = set(events.Tags()["scalars"])
    assert {
        "round/picked",
        "round/energy_j",
        "eval/accuracy",
        "device/rpi4-000/energy_j",
    } <= scalars
    assert "eval/energy_j" not in scalars  # NaN: unknown, not logged
    accuracy = [(e.step, round(e.value, 2)) for e in events.Scalars("eval/accuracy")]
    assert accuracy == [(1, 0.61), (2, 0.66)]
    assert "rounds/text_summary" in events.Tags()["tensors"]


def test_mlflow_logs_a_run_in_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("mlflow", reason="the mlflow extra is not installed")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (logger,) = build_loggers(["mlflow"], run_dir(tmp_path))
    assert isinstance(logger, MlflowLogger)
    logger.log_round(1, 1, ROWS)
    logger.log_evaluation(1, 1, {"accuracy": 0.61, "virtual_time_s": 12.0})
    logger.close()
    assert (tmp_path / "mlflow.db").is_file()
    client = logger.client
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED"
    assert run.data.params["seed"] == "3" and run.data.params["train.lr"] == "0.01"
    assert [
        (m.step, m.value) for m in client.get_metric_history(logger.run_id, "eval/accuracy")
    ] == [(1, 0.61)]
    assert run.data.metrics["round/energy_j"] == 2.5
    artifacts = tmp_path / "mlartifacts"
    assert list(artifacts.rglob("round_0001.json"))


def test_an_unknown_logger_names_the_key_and_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(
        FedbenchError,
        match=r"report.loggers: unknown logger 'tensorbord' "
        r"\(did you mean 'tensorboard'\?\); valid: mlflow, tensorboard",
    ):
        build_loggers(["tensorbord"], tmp_path)
    with pytest.raises(FedbenchError, match="is not a fedbench RunLogger"):
        build_loggers([{"_target_": "pathlib.Path"}], tmp_path)


def test_a_missing_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    with pytest.raises(FedbenchError, match=r"pip install 'fedbench\[tensorboard\]'"):
        build_loggers(["tensorboard"], tmp_path)
    monkeypatch.setitem(sys.modules, "mlflow.tracking", None)
    with pytest.raises(FedbenchError, match=r"pip install 'fedbench\[mlflow\]'"):
        build_loggers(["mlflow"], tmp_path)


class Recording(RunLogger):
    name = "recording"
    extra = "none"

    def __init__(self, run_dir: Path, prefix: str = "") -> None:
        super().__init__(run_dir)
        self.prefix = prefix
        self.seen: list[tuple[str, int]] = []

    def log_round(self, round, day, rows):  # type: ignore[no-untyped-def]
        self.seen.append((self.prefix + "round", round))

    def log_evaluation(self, round, day, metrics):  # type: ignore[no-untyped-def]
        self.seen.append((self.prefix + "eval", round))

    def close(self) -> None:
        self.seen.append((self.prefix + "close", -1))


def test_a_logger_of_your_own_by_target(tmp_path: Path) -> None:
    (logger,) = build_loggers([{"_target_": f"{__name__}.Recording", "prefix": "x-"}], tmp_path)
    assert isinstance(logger, Recording) and logger.run_dir == tmp_path
    logger.log_round(1, 1, ROWS)
    logger.close()
    assert logger.seen == [("x-round", 1), ("x-close", -1)]
