"""Issue 48, round two, items 3 and 6: what a file from outside may make fedbench do.

Item 3: an allowlisted `_target_` from a shared run folder took its arguments
from the same file - `MlflowLogger(tracking_uri=http://host)` sent the config,
the folder's path and every round's metrics there; `TensorBoardLogger(log_dir=)`
wrote anywhere. Item 6: a 1 KB config.yaml alias bomb hung `resume=`; a 2 GB
sparse trace was read whole (RSS past 4 GB) before any check. Every file
fedbench reads from outside now has a size cap and a structure cap, checked
before it is parsed (fedbench.trust.bounded).

A case that hung or ate memory before the fix runs in a child process that
is killed past a time or resident-memory limit, so a regression fails fast
and leaves the host alone.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from fedbench.errors import FedbenchError

KEY = "fleet.population.trace.availability"
MLFLOW = "fedbench.report.loggers.MlflowLogger"
TENSORBOARD = "fedbench.report.loggers.TensorBoardLogger"
# Ten values, each level ten aliases of the one before: 10^9 values in about 1 KB.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n"
    for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.fixture(scope="module")
def stock() -> dict[str, Any]:
    from tests.test_compose import typed

    return typed(["experiment=smoke"]).to_config()


def _folder(tmp_path: Path, config: dict[str, Any] | str) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    text = config if isinstance(config, str) else yaml.safe_dump(config, sort_keys=False)
    (run / "config.yaml").write_text(text)
    return run


def _with(stock: dict[str, Any], group: str, **values: Any) -> dict[str, Any]:
    config = copy.deepcopy(stock)
    config[group].update(values)
    return config


def _refused(run: Path, composed: object = None) -> str:
    from fedbench.resume import resumed_experiment

    with pytest.raises(FedbenchError) as refused:
        resumed_experiment(run, composed)  # type: ignore[arg-type]
    message = str(refused.value)
    assert "\n" not in message
    return message


# --- 3. an allowlisted class's arguments ---------------------------------------------------


def test_an_mlflow_tracking_uri_from_a_folder_is_refused_naming_the_key(
    tmp_path: Path, stock: dict[str, Any]
) -> None:
    url = "http://collector.example:5000"
    run = _folder(
        tmp_path, _with(stock, "report", loggers=[{"_target_": MLFLOW, "tracking_uri": url}])
    )
    assert _refused(run).startswith(
        f"resume={run}: config.yaml: report.loggers[0].tracking_uri={url!r} is a URL, and a "
        "config on disk may not send the run anywhere; nothing was called (set it to null in "
        "config.yaml, or, if it is yours, give the run's overrides again with it next to resume=)"
    )


def test_a_tensorboard_log_dir_outside_the_folder_is_refused(
    tmp_path: Path, stock: dict[str, Any]
) -> None:
    elsewhere = tmp_path / "elsewhere"
    loggers = [{"_target_": TENSORBOARD, "log_dir": str(elsewhere)}]
    run = _folder(tmp_path, _with(stock, "report", loggers=loggers))
    message = _refused(run)
    assert message.startswith(
        f"resume={run}: config.yaml: report.loggers[0].log_dir={str(elsewhere)!r} is "
        f"{elsewhere}, outside the run folder {run}"
    )
    assert not elsewhere.exists()


def test_a_log_dir_that_climbs_out_of_the_folder_is_refused(
    tmp_path: Path, stock: dict[str, Any]
) -> None:
    run = tmp_path / "run"
    loggers = [{"_target_": TENSORBOARD, "log_dir": f"{run}/tb/../../out"}]
    _folder(tmp_path, _with(stock, "report", loggers=loggers))
    assert "report.loggers[0].log_dir=" in _refused(run)


def test_a_log_dir_inside_the_folder_passes(tmp_path: Path, stock: dict[str, Any]) -> None:
    from fedbench.resume import resumed_experiment

    run = tmp_path / "run"
    loggers = [{"_target_": TENSORBOARD, "log_dir": str(run / "tb")}]
    _folder(tmp_path, _with(stock, "report", loggers=loggers))
    assert resumed_experiment(run, None).output_dir == str(run)


@pytest.mark.parametrize(
    ("values", "key", "why"),
    [
        ({"ray_address": "ray://cluster.example:10001"}, "runtime.ray_address", "is a URL"),
        ({"ray_address": "10.1.2.3:6379"}, "runtime.ray_address", "is not this host"),
        ({"ray_temp_dir": "/tmp/shared-ray"}, "runtime.ray_temp_dir", "outside the run folder"),
    ],
)
def test_the_runtime_may_not_leave_the_host_or_the_folder(
    tmp_path: Path, stock: dict[str, Any], values: dict[str, str], key: str, why: str
) -> None:
    run = _folder(tmp_path, _with(stock, "runtime", **values))
    message = _refused(run)
    assert message.startswith(f"resume={run}: config.yaml: {key}=") and why in message


def test_a_value_the_operator_gives_too_is_the_operators_own(
    tmp_path: Path, stock: dict[str, Any]
) -> None:
    from fedbench.experiment.schema import Experiment
    from fedbench.resume import resumed_experiment

    url = "http://mlflow.lab.example"
    config = _with(stock, "report", loggers=[{"_target_": MLFLOW, "tracking_uri": url}])
    run = _folder(tmp_path, config)
    # `resume=F` with overrides: the operator's composition, which must equal the folder's.
    mine = Experiment.from_config({**config, "output_dir": str(run)}, "")
    assert resumed_experiment(run, mine).to_config()["report"]["loggers"][0]["tracking_uri"] == url


def test_an_argument_is_checked_wherever_it_is_nested(tmp_path: Path) -> None:
    from fedbench.trust.arguments import check_arguments

    config = {"x": {"_target_": "a.B", "options": {"sinks": ["file.txt", "https://a.example/"]}}}
    with pytest.raises(FedbenchError, match=r"^S: x\.options\.sinks\[1\]='https://a\.exa"):
        check_arguments(config, tmp_path, "S", None)
    # Outside a _target_ it is data, not an argument: the keys of fedbench's own schema.
    check_arguments({"note": "https://a.example/"}, tmp_path, "S", None)


@pytest.mark.parametrize(
    "overrides",
    [
        ["experiment=smoke"],
        ["experiment=study_rounds"],
        ["data=cifar10", "report.loggers=[tensorboard,mlflow]"],
        ["runtime=deployment"],
    ],
)
def test_fedbench_s_own_configs_pass_the_argument_check(
    tmp_path: Path, overrides: list[str]
) -> None:
    from fedbench.trust.arguments import check_arguments
    from tests.test_compose import typed

    check_arguments(typed(overrides).to_config(), tmp_path, "S", None)


# --- 6. resource bombs ----------------------------------------------------------------------

# Run in a child: `code` gets the arguments as sys.argv[1:]; it prints the refusal.
_RESUME = """
import sys
from pathlib import Path
from fedbench.errors import FedbenchError
from fedbench.resume import resumed_experiment
try:
    resumed_experiment(Path(sys.argv[1]), None)
except FedbenchError as exc:
    print(exc)
"""
_TRACE = f"""
import sys
from fedbench.errors import FedbenchError
from fedbench.population.traces import AVAILABILITY, read_table
try:
    read_table(sys.argv[1], {KEY!r}, AVAILABILITY)
except FedbenchError as exc:
    print(exc)
"""
# The child's own peak (kB): VmHWM belongs to the address space exec made. Not ru_maxrss,
# which Linux carries across fork and exec: under xdist it was the 2 GB of the worker.
_PEAK = (
    "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))\n"
)
_ANALYZE = """
import sys
from pathlib import Path
from fedbench.errors import FedbenchError
from fedbench.analyze.runs import load_run
try:
    load_run(Path(sys.argv[1]))
except FedbenchError as exc:
    print(exc)
"""


def _child(code: str, *args: str, limit_s: float = 60, limit_mb: float = 1500) -> tuple[str, float]:
    """What the child printed and how long it took; killed past `limit_s` or `limit_mb` RSS."""
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    peak = 0.0
    while proc.poll() is None:
        peak = max(peak, _rss_mb(proc.pid))
        if peak > limit_mb or time.monotonic() - start > limit_s:
            proc.kill()
            proc.wait()
            pytest.fail(f"killed after {time.monotonic() - start:.0f} s at {peak:.0f} MB RSS")
        time.sleep(0.02)
    out = proc.stdout.read().decode() if proc.stdout else ""
    assert proc.returncode == 0, out[-3000:]
    return out.strip(), time.monotonic() - start


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0.0


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as f:
        f.truncate(size)  # no disk used: a hole of NUL bytes
    return path


def test_a_config_yaml_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    run = _folder(tmp_path, BOMB)
    assert len(BOMB) < 1100
    out, took = _child(_RESUME, str(run))
    assert out == (
        f"resume={run}: config.yaml: line 5: its aliases expand to more than 100,000 values "
        "(an alias bomb); fedbench reads YAML up to 64 levels and 100,000 values of aliases; "
        "refused before building anything"
    )
    assert took < 30


def test_yaml_nested_past_the_depth_cap_is_refused_unbuilt() -> None:
    from fedbench.trust.bounded import check_yaml

    with pytest.raises(FedbenchError, match=r"^F: line 1: nested more than 64 levels deep"):
        check_yaml("[" * 10_000 + "]" * 10_000, "F")
    start = time.monotonic()
    with pytest.raises(FedbenchError, match="an alias bomb"):
        check_yaml(BOMB, "F")
    assert time.monotonic() - start < 1


def test_a_few_anchors_and_aliases_still_load() -> None:
    from fedbench.trust.bounded import check_yaml

    check_yaml("base: &b {cores: 4, mem: 2}\nbig: *b\nsmall: {<<: *b, cores: 2}\n", "F")


def test_a_2_gb_sparse_trace_is_refused_before_it_is_read(tmp_path: Path) -> None:
    trace = _sparse(tmp_path / "trace.csv", 2 * 1024**3)
    out, took = _child(_TRACE + _PEAK, str(trace))
    message, peak_kb = out.splitlines()
    assert message == (
        f"{KEY}={str(trace)!r}: 2 GiB, more than the 256 MiB a trace CSV may be; refused "
        "before reading it (give a file under 256 MiB)"
    )
    assert took < 30 and int(peak_kb) < 400 * 1024  # the interpreter and numpy, no trace


def test_a_trace_under_the_size_cap_with_an_endless_line_is_refused_by_its_line(
    tmp_path: Path,
) -> None:
    trace = _sparse(tmp_path / "trace.csv", 64 * 1024**2)
    out, _ = _child(_TRACE + _PEAK, str(trace))
    message, peak_kb = out.splitlines()
    assert message == (
        f"{KEY}={str(trace)!r}: line 1 is longer than 4,096 bytes, which no such file "
        "fedbench reads has; refused before parsing it"
    )
    assert int(peak_kb) < 400 * 1024


@pytest.mark.parametrize(
    ("name", "size", "cap"),
    [
        ("config.yaml", 32 * 1024**2, "16 MiB a run's config.yaml"),
        ("checkpoint.pt", 5 * 1024**3, "4 GiB a checkpoint"),
        ("rounds.csv", 2 * 1024**3, "1 GiB a run's CSV"),
        ("server_rounds.csv", 2 * 1024**3, "1 GiB a run's CSV"),
        ("summary.json", 2 * 1024**3, "64 MiB a summary.json"),
    ],
)
def test_resume_refuses_an_oversized_run_folder_file_unread(
    tmp_path: Path, stock: dict[str, Any], name: str, size: int, cap: str
) -> None:
    run = _folder(tmp_path, stock)
    _sparse(run / name, size)
    out, _ = _child(_RESUME, str(run))
    shown = f"{size / 1024**3:.3g} GiB" if size >= 1024**3 else f"{size // 1024**2} MiB"
    assert out.startswith(f"resume={run}: {name}: {shown}, more than the {cap} may be"), out


@pytest.mark.parametrize("name", ["rounds.csv", "summary.json", "config.yaml"])
def test_analyze_refuses_an_oversized_run_folder_file_unread(tmp_path: Path, name: str) -> None:
    from tests.analyze.folders import Device, make_folder

    run = make_folder(tmp_path / "run", {1: [Device("rpi4-000", "ok", 3.0, 1.0)]}, {1: 0.5})
    _sparse(run / name, 2 * 1024**3)
    out, _ = _child(_ANALYZE, str(run))
    assert out.startswith(f"{run / name}: 2 GiB, more than the "), out


def test_a_rounds_csv_line_past_the_cap_is_refused_by_analyze(tmp_path: Path) -> None:
    from fedbench.analyze.runs import load_run
    from tests.analyze.folders import Device, make_folder

    run = make_folder(tmp_path / "run", {1: [Device("rpi4-000", "ok", 3.0, 1.0)]}, {1: 0.5})
    with (run / "rounds.csv").open("a") as f:
        f.write("1," + "x" * 100_000 + "\n")
    with pytest.raises(FedbenchError, match=r"rounds\.csv: line 3 is longer than 65,536 bytes"):
        load_run(run)


def test_a_device_profile_alias_bomb_is_refused(tmp_path: Path) -> None:
    from fedbench.devices.profile import load_profile

    path = tmp_path / "board.yaml"
    path.write_text(BOMB)
    with pytest.raises(FedbenchError, match=rf"^{path}: line 5: its aliases expand to more"):
        load_profile(path)


def test_an_oversized_device_profile_is_refused_unread(tmp_path: Path) -> None:
    from fedbench.devices.profile import load_profile

    path = _sparse(tmp_path / "board.yaml", 2 * 1024**3)
    with pytest.raises(FedbenchError, match=rf"^{path}: 2 GiB, more than the 1 MiB a device pro"):
        load_profile(path)


def test_an_oversized_fedscale_pickle_is_refused_unread(tmp_path: Path) -> None:
    from fedbench.population.fedscale import _load

    path = _sparse(tmp_path / "client_behave_trace", 2 * 1024**3)
    with pytest.raises(FedbenchError) as refused:
        _load(str(path), "behave")
    assert str(refused.value) == (
        f"behave={str(path)!r}: 2 GiB, more than the 1 GiB a FedScale trace pickle may be; "
        "refused before reading it (give a file under 1 GiB)"
    )


def test_a_summary_json_nested_past_what_json_can_read_is_one_line(tmp_path: Path) -> None:
    from fedbench.analyze.runs import load_run
    from tests.analyze.folders import Device, make_folder

    run = make_folder(tmp_path / "run", {1: [Device("rpi4-000", "ok", 3.0, 1.0)]}, {1: 0.5})
    (run / "summary.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FedbenchError, match=r"summary\.json: nested deeper than Python's JSON"):
        load_run(run)
