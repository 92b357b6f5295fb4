"""docs/results.md documents every column and key a run folder holds; a new one without an
entry fails here."""

from __future__ import annotations

import json
import re
from dataclasses import fields
from pathlib import Path

import fedbench
from fedbench.analyze import load_run
from fedbench.analyze.rounds import ROUNDS_SUMMARY_COLUMNS, rounds_summary
from fedbench.analyze.runs import SERVER_ROUND_COLUMNS
from fedbench.analyze.tables import RunRow, StrategyRow
from fedbench.core import records
from fedbench.core.records import CSV_FIELDS, RoundReport
from fedbench.report.writer import DayResult, RunWriter

DOC = Path(__file__).resolve().parents[2] / "docs" / "results.md"
SOURCE = Path(fedbench.__file__).resolve().parent


def documented(section: str) -> set[str]:
    """The backticked names in the first column of the tables under `## section`/`### section`."""
    text = DOC.read_text()
    match = re.search(rf"^#+ {re.escape(section)}\n(.*?)(?=^#+ |\Z)", text, re.S | re.M)
    assert match, f"docs/results.md has no section '{section}'"
    names: set[str] = set()
    for line in match.group(1).splitlines():
        if line.startswith("| `"):
            names.update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return names


def key_paths(value: object, prefix: str = "") -> set[str]:
    """Dotted paths of every key in a JSON value; list items as `key[].sub`."""
    out: set[str] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{prefix}.{key}" if prefix else key
            out.add(path)
            # Keyed by day number (and width rate): data, not names.
            if key not in ("accuracy_per_day", "accuracy_per_rate", "final_accuracy_per_rate"):
                out |= key_paths(item, path)
    elif isinstance(value, list) and value:
        out |= key_paths(value[0], prefix + "[]")
    return out


def server_meta_keys() -> set[str]:
    """Keys the server loop adds to the summary through RunWriter's meta."""
    keys: set[str] = set()
    for path in SOURCE.rglob("*.py"):
        text = path.read_text()
        keys |= set(re.findall(r"\bmeta\[[\"'](\w+)[\"']\]", text))
        for call in re.findall(r"RunWriter\([^,]+,\s*\{([^}]*)\}", text):
            keys |= set(re.findall(r"[\"'](\w+)[\"']\s*:", call))
    return keys


def test_every_rounds_csv_column_is_documented() -> None:
    missing = set(CSV_FIELDS) - documented("rounds.csv")
    assert not missing, f"docs/results.md: rounds.csv columns without an entry: {sorted(missing)}"
    # The columns the server adds for asynchronous rounds are documented ahead of use.
    assert {"start_s", "end_s", "model_version", "staleness"} <= documented("rounds.csv")


def test_every_client_metrics_column_is_documented() -> None:
    missing = set(records.METRIC_FIELDS) - documented("client_metrics.csv")
    assert not missing, f"client_metrics.csv columns without an entry: {sorted(missing)}"
    assert "`client_metrics.csv`" in DOC.read_text()  # in the run folder's table of files


def test_every_server_rounds_column_is_documented() -> None:
    written = set(SERVER_ROUND_COLUMNS) | set(getattr(records, "SERVER_ROUND_FIELDS", ()))
    missing = written - documented("server_rounds.csv")
    assert not missing, f"server_rounds.csv columns without an entry: {sorted(missing)}"


def test_every_rounds_summary_column_is_documented(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, {"name": "doc", "num_devices": 1})
    writer.day(DayResult(0, 0, 0.5, 1.0, 0.0, 0.0))
    writer.rounds([RoundReport(1, 1, 0, "rpi4-000", "rpi4", "emulated", "ok", energy_j=2.0)])
    writer.day(DayResult(1, 1, 0.6, 0.9, 10.0, 1.0, 0.5))
    writer.finish("completed")
    (row,) = rounds_summary(load_run(tmp_path))
    assert tuple(row) == ROUNDS_SUMMARY_COLUMNS
    missing = set(ROUNDS_SUMMARY_COLUMNS) - documented("rounds_summary.csv")
    assert not missing, f"rounds_summary.csv columns without an entry: {sorted(missing)}"


def test_every_summary_key_is_documented(tmp_path: Path) -> None:
    meta = {key: None for key in server_meta_keys()}
    assert {"name", "num_devices", "predicted_oom"} <= set(meta)
    writer = RunWriter(tmp_path / "a", meta)
    writer.day(DayResult(0, 0, 0.5, 1.0, 0.0, 0.0))
    writer.rounds([RoundReport(1, 1, 0, "rpi4-000", "rpi4", "emulated", "ok", energy_j=2.0)])
    writer.day(DayResult(1, 1, 0.6, 0.9, 10.0, 1.0, 0.5), {"1": 0.6, "0.5": 0.4})  # submodels
    state = writer.state_dict()
    writer.finish("completed")
    resumed = RunWriter(tmp_path / "a", meta)  # a resumed run adds resumed_time
    resumed.load_state_dict(state)
    summary = resumed.finish("completed")
    keys = key_paths(json.loads(json.dumps(summary, default=str)))
    missing = keys - documented("summary.json")
    assert not missing, f"summary.json keys without an entry in docs/results.md: {sorted(missing)}"


def test_every_comparison_column_is_documented() -> None:
    assert {f.name for f in fields(RunRow)} <= documented("runs.csv")
    flat = set()
    for f in fields(StrategyRow):
        if f.name == "failures":
            flat |= {"oom", "dropped", "timeout", "failed"}
        elif str(f.type).startswith("tuple"):
            flat |= {f"{f.name}_mean", f"{f.name}_std"}
        else:
            flat.add(f.name)
    assert flat <= documented("results.csv"), sorted(flat - documented("results.csv"))


def test_the_doc_names_every_figure() -> None:
    from fedbench.analyze import RUN_FIGURES

    assert set(RUN_FIGURES) <= documented("figures/")
