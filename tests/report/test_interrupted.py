"""A summary still saying `running` is marked interrupted by the driver; nothing else is."""

from __future__ import annotations

import json
from pathlib import Path

from fedbench.report.interrupted import LATE_ENDING, mark_interrupted


def _summary(run_dir: Path, status: str) -> dict[str, object]:
    summary = {"status": status, "error": "", "final_day": 3, "provenance": {"end_time": None}}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return summary


def test_a_running_summary_is_marked_and_keeps_what_it_measured(tmp_path: Path) -> None:
    _summary(tmp_path, "running")
    assert mark_interrupted(tmp_path)
    marked = json.loads((tmp_path / "summary.json").read_text())
    assert marked["status"] == "interrupted" and marked["failure"] == "interrupted"
    assert marked["error"] == LATE_ENDING
    assert marked["final_day"] == 3 and marked["provenance"]["end_time"]


def test_an_ending_the_server_wrote_and_odd_folders_are_left_as_they_are(tmp_path: Path) -> None:
    assert not mark_interrupted(tmp_path)  # no summary: the run never started its rounds
    written = _summary(tmp_path, "completed")
    assert not mark_interrupted(tmp_path)
    assert json.loads((tmp_path / "summary.json").read_text()) == written
    other = tmp_path / "other"
    other.mkdir()
    _summary(other, "running")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "summary.json").symlink_to(other / "summary.json")
    assert not mark_interrupted(linked)  # never written through a link
    assert json.loads((other / "summary.json").read_text())["status"] == "running"
