"""summary.json says where a result came from, and never turns an unknown figure into 0."""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

from fedbench.core.records import RoundReport
from fedbench.report.provenance import NOT_GIT, git_commit, provenance
from fedbench.report.writer import DayResult, RunWriter

REPO = Path(__file__).resolve().parents[2]


def report(device: str, status: str = "ok", **kw: float) -> RoundReport:
    return RoundReport(1, 1, 0, device, device[:-4], "emulated", status, **kw)  # type: ignore[arg-type]


def test_provenance_names_code_software_host_and_command() -> None:
    p = provenance(["python", "-m", "fedbench", "experiment=smoke", "seed=1"])
    assert p["command"] == "python -m fedbench experiment=smoke seed=1"
    assert p["fedbench_version"] and p["python"] and p["torch"] and p["flwr"] and p["ray"]
    # The folders this checkout's own package reads, not another install's.
    assert p["fedbench_package"] == str(REPO / "fedbench")
    assert p["conf_dir"] == str(REPO / "fedbench" / "conf")
    assert p["profiles_dir"] == str(REPO / "fedbench" / "device_profiles")
    assert isinstance(p["cpu_cores"], int) and p["cpu_cores"] >= 1 and p["cpu_model"]
    datetime.fromisoformat(str(p["start_time"]))
    assert p["end_time"] is None
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    if head.returncode == 0:  # this checkout
        assert p["git_commit"] == head.stdout.strip()
    else:
        assert p["git_commit"] == NOT_GIT


def test_a_folder_that_is_no_checkout_says_so(tmp_path: Path) -> None:
    assert git_commit(tmp_path) == (NOT_GIT, None)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inner = tmp_path / "site-packages"
    inner.mkdir()
    # A package installed somewhere inside another repository is not that repository's code.
    assert git_commit(inner) == (NOT_GIT, None)


def test_summary_carries_provenance_and_the_end_time(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, {"name": "p", "num_devices": 1})
    writer.day(DayResult(0, 0, 0.5, 1.0, 0.0, 0.0))
    running = json.loads((tmp_path / "summary.json").read_text())
    assert running["provenance"]["end_time"] is None
    summary = json.loads(json.dumps(writer.finish("completed")))
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk == summary
    start = datetime.fromisoformat(on_disk["provenance"]["start_time"])
    assert datetime.fromisoformat(on_disk["provenance"]["end_time"]) >= start


def test_unknown_energy_is_null_and_counted(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "host", {"name": "h", "num_devices": 2})
    writer.day(DayResult(0, 0, 0.5, 1.0, 0.0, 0.0))
    writer.rounds([report("host-000"), report("host-001", "dropped")])
    writer.day(DayResult(1, 1, 0.6, 0.9, 5.0, 1.0, 0.4))
    totals = json.loads((tmp_path / "host" / "summary.json").read_text())["totals"]
    assert totals["energy_j"] is None and totals["energy_unknown_reports"] == 2

    mixed = RunWriter(tmp_path / "mixed", {"name": "m", "num_devices": 2})
    mixed.rounds([report("rpi4-000", energy_j=2.5), report("host-000")])
    mixed.day(DayResult(1, 1, 0.6, 0.9, 5.0, 1.0, 0.4))
    summary = json.loads((tmp_path / "mixed" / "summary.json").read_text())
    assert summary["totals"]["energy_j"] == 2.5
    assert summary["totals"]["energy_unknown_reports"] == 1


def test_nan_is_written_as_null_not_invalid_json(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, {"name": "n", "num_devices": 1})
    writer.day(DayResult(0, 0, 0.5, float("nan"), 0.0, 0.0))
    text = (tmp_path / "summary.json").read_text()
    assert "NaN" not in text
    day0 = json.loads(text)["days"][0]
    assert day0["loss"] is None and day0["round_wall_s"] is None  # day 0 ran no round


def test_a_resumed_run_keeps_its_first_start(tmp_path: Path) -> None:
    first = RunWriter(tmp_path, {"name": "r", "num_devices": 1})
    first.rounds([report("rpi4-000", energy_j=1.0)])
    state = first.state_dict()
    started = first.provenance["start_time"]
    second = RunWriter(tmp_path, {"name": "r", "num_devices": 1})
    second.load_state_dict(state)
    assert second.provenance["start_time"] == started and "resumed_time" in second.provenance
    assert second.energy_known == 1


def test_a_checkpoint_from_before_energy_counts_still_loads(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path, {"name": "o", "num_devices": 1})
    writer.rounds([report("rpi4-000", energy_j=1.0)])
    state = {
        k: v for k, v in writer.state_dict().items() if k not in ("energy_known", "start_time")
    }
    again = RunWriter(tmp_path, {"name": "o", "num_devices": 1})
    again.load_state_dict(state)
    assert again.energy_known == 1 and "resumed_time" not in again.provenance
