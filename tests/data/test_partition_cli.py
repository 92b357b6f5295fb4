"""`data.partition.*` from the command line: refused before a run folder exists, or run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import run_fedbench


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["data.partition.scheme=pathologica"],
            "data.partition.scheme='pathologica': unknown (did you mean 'pathological'?)",
        ),
        (
            ["data.partition.scheme=shard", "data.partition.alpha=0.5"],
            "data.partition.alpha=0.5: not a parameter of scheme shard",
        ),
        (["data.partition.scheme=natural_id"], "this data has no natural owners"),
    ],
)
def test_a_bad_partition_is_one_line_exit_2_and_no_folder(
    tmp_path: Path, args: list[str], message: str
) -> None:
    run_dir = tmp_path / "run"
    done = run_fedbench(["experiment=smoke", *args], run_dir=run_dir, timeout=240)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("fedbench: error: ") and message in lines[-1], done.stderr
    assert "Traceback" not in done.stderr
    assert not run_dir.exists()
