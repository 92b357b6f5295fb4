"""client_metrics.csv: every number a ClientApp returned, kept (issue 46, item 3)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, MetricRecord, RecordDict

from fedbench.core.records import CSV_FIELDS, ClientMetric, RoundReport, to_record
from fedbench.protocol import MAX_METRICS, REPORT, reply_metrics
from fedbench.report.writer import CLIENT_METRICS_CSV, ROUNDS_CSV, RunWriter


def test_every_number_of_a_reply_is_read_in_either_layout() -> None:
    content = RecordDict(
        {
            "arrays": ArrayRecord(),
            "metrics": MetricRecord(
                {"train_loss": 0.25, "train_acc": 0.9, "num-examples": 160, "per-class": [1, 2]}
            ),
            # Flower's legacy FitRes: its metrics in a ConfigRecord, num_examples apart.
            "fitres.metrics": ConfigRecord({"f1": 0.5, "tag": "text", "converged": True}),
            "fitres.num_examples": MetricRecord({"num_examples": 7}),
            "node": ConfigRecord({"partition-id": 3}),  # a ConfigRecord, not metrics
            REPORT: to_record(RoundReport(1, 1, 0, "d", "host", "host", "ok")),
        }
    )
    assert reply_metrics(content) == (
        ("metrics", "train_loss", 0.25),
        ("metrics", "train_acc", 0.9),
        ("metrics", "num-examples", 160),
        ("metrics", "per-class[0]", 1),
        ("metrics", "per-class[1]", 2),
        ("fitres.num_examples", "num_examples", 7),
        ("fitres.metrics", "f1", 0.5),
        ("fitres.metrics", "converged", 1),
    )


def test_a_reply_cannot_flood_the_file() -> None:
    many = MetricRecord({f"k{i}\n,\x00" + "x" * 100: float(i) for i in range(500)})
    metrics = reply_metrics(RecordDict({"metrics": many}))
    assert len(metrics) == MAX_METRICS
    assert all(len(key) <= 64 and key.isprintable() for _, key, _ in metrics)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def test_the_writer_keeps_them_per_round_and_a_resume_rewrites_the_unfinished_round(
    tmp_path: Path,
) -> None:
    writer = RunWriter(tmp_path, {"name": "m"})
    report = RoundReport(1, 1, 0, "rpi4-000", "rpi4", "emulated", "ok")
    writer.rounds(
        [report],
        [
            ClientMetric(1, 1, "rpi4-000", "train", "metrics", "train_acc", 0.75),
            ClientMetric(1, 1, "rpi4-000", "evaluate", "metrics", "eval_loss", math.nan),
        ],
    )
    state = writer.state_dict()  # the checkpoint after round 1
    writer.rounds([report], [ClientMetric(2, 2, "rpi4-000", "train", "metrics", "n", 3)])
    rows = _rows(tmp_path / CLIENT_METRICS_CSV)  # flushed with the round, before the end
    assert [(r["round"], r["message"], r["key"], r["value"]) for r in rows] == [
        ("1", "train", "train_acc", "0.75"),
        ("1", "evaluate", "eval_loss", "nan"),
        ("2", "train", "n", "3"),
    ]
    writer.finish("failed")
    resumed = RunWriter(tmp_path, {"name": "m"})
    resumed.load_state_dict(state)  # round 2 did not complete: it runs again
    resumed.rounds([report], [ClientMetric(2, 2, "rpi4-000", "train", "metrics", "n", 4)])
    resumed.finish("completed")
    assert [r["value"] for r in _rows(tmp_path / CLIENT_METRICS_CSV)] == ["0.75", "nan", "4"]


def test_a_folder_begun_before_a_column_keeps_its_own_header(tmp_path: Path) -> None:
    old = [c for c in CSV_FIELDS if c != "cost_basis"]
    (tmp_path / ROUNDS_CSV).write_text(",".join(old) + "\n")
    writer = RunWriter(tmp_path, {"name": "old"})
    writer.rounds([RoundReport(1, 1, 0, "d", "host", "host", "ok", cost_basis="host")])
    writer.finish("completed")
    (row,) = _rows(tmp_path / ROUNDS_CSV)
    assert list(row) == old and row["device"] == "d" and row["reason"] == ""
