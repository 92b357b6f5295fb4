"""fedbench installs like a package: a wheel built from the tracked files alone holds every
subpackage, config and profile, and runs from a clean environment with no checkout on the path.

CI installs the checkout in editable mode, which would hide a file the wheel leaves out (an
editable install maps the package to the checkout). So the wheel is built here from a copy of
the tracked files only (what a fresh clone holds), without build isolation (no download), and
installed into a new virtual environment. That environment sees this one's third-party
packages through a path entry, but not this one's editable fedbench: site only runs the
`.pth` hooks of its own site-packages, and the editable install's finder is such a hook.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

import fedbench

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("fedbench", "strategies")  # the top-level packages pyproject.toml discovers


def _tracked(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(root), "ls-files", "-z", "--cached"],
        capture_output=True,
        check=True,
        text=True,
    )
    return [f for f in out.stdout.split("\0") if f and (root / f).is_file()]


def _copy_tracked(dest: Path) -> list[str]:
    files = _tracked(REPO)
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    return files


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """(the wheel, the tracked files it was built from)."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    src = tmp_path_factory.mktemp("clone")
    files = _copy_tracked(src)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["--disable-pip-version-check", "-w", str(dist), str(src)],
        check=True,
        capture_output=True,
    )
    (wheel,) = dist.glob("fedbench-*.whl")
    return wheel, files


def test_the_wheel_holds_every_tracked_file_of_the_packages(
    built: tuple[Path, list[str]],
) -> None:
    wheel, files = built
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = [f for f in files if f.split("/")[0] in PACKAGES]
    assert [f for f in shipped if f not in names] == []
    # What the issue found missing, and the data folders a run cannot start without.
    for must in (
        "fedbench/algorithms/__init__.py",
        "fedbench/trust/__init__.py",
        "fedbench/conf/config.yaml",
        "fedbench/conf/experiment/smoke.yaml",
        "fedbench/device_profiles/rpi4.yaml",
        "strategies/oort.py",
    ):
        assert must in names
    # Every config group and every profile, counted against the checkout's folders.
    conf = [f for f in names if f.startswith("fedbench/conf/") and f.endswith(".yaml")]
    assert len(conf) == len(list((REPO / "fedbench" / "conf").rglob("*.yaml")))
    profiles = [f for f in names if f.startswith("fedbench/device_profiles/")]
    assert {Path(f).name for f in profiles if f.endswith(".yaml")} == {
        p.name for p in (REPO / "fedbench" / "device_profiles").glob("*.yaml")
    }
    # No tests, benchmarks or calibration inside the wheel.
    assert not [n for n in names if n.split("/")[0] in ("tests", "benchmarks", "calibration")]


def test_the_version_has_one_source(built: tuple[Path, list[str]]) -> None:
    wheel, _ = built
    assert wheel.name.startswith(f"fedbench-{fedbench.__version__}-")
    metadata = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith("/METADATA"))
    text = zipfile.ZipFile(wheel).read(metadata).decode()
    assert f"\nVersion: {fedbench.__version__}\n" in text


def _venv_with(wheel: Path, where: Path) -> Path:
    """A new venv holding the wheel; third-party packages come from this interpreter's."""
    venv.EnvBuilder(with_pip=False).create(where)
    python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout.strip()
    # A plain path line: the folder joins sys.path, its own .pth hooks (the editable
    # fedbench's finder among them) do not run.
    # Every site folder this interpreter reads: a --system-site-packages venv's third-party
    # packages live in the base interpreter's, not in the venv's own purelib.
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    ours |= {p for p in sys.path if Path(p).name in ("site-packages", "dist-packages")}
    (Path(purelib) / "_fedbench_test_deps.pth").write_text("\n".join(sorted(ours)) + "\n")
    # --ignore-installed: the new venv sees this environment's packages, fedbench's own
    # metadata among them, and pip would otherwise take "fedbench 0.1.0 is already
    # installed" (a non-editable one, or one in a --system-site-packages venv) as done
    # and put nothing into the new venv.
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps"]
        + ["--ignore-installed", "--no-index", "--disable-pip-version-check", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert (where / "bin" / "fedbench").is_file(), installed.stdout + installed.stderr
    return where


@pytest.mark.slow
def test_the_installed_wheel_runs_smoke_and_help(
    built: tuple[Path, list[str]], tmp_path: Path
) -> None:
    env_dir = _venv_with(built[0], tmp_path / "venv")
    outside = tmp_path / "elsewhere"  # no checkout on the path: not the repository
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["FLWR_TELEMETRY_ENABLED"] = "0"

    shown = subprocess.run(
        [str(env_dir / "bin" / "fedbench"), "--help"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "commands:" in shown.stdout and "run " in shown.stdout

    run_dir = tmp_path / "run"
    smoke = subprocess.run(
        [str(env_dir / "bin" / "python"), "-m", "fedbench", "experiment=smoke"]
        + [f"hydra.run.dir={run_dir}"],
        cwd=outside,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert smoke.returncode == 0, smoke.stderr[-3000:]
    installed = env_dir.resolve()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
    where = summary["provenance"]
    # The run read the wheel's own code, configs and profiles, and says so.
    for key in ("fedbench_package", "conf_dir", "profiles_dir"):
        assert Path(where[key]).resolve().is_relative_to(installed), (key, where[key])
    assert where["git_commit"] == "not a git checkout"
    assert f"configs {where['conf_dir']}" in smoke.stdout


def test_a_second_checkout_reads_its_own_configs(tmp_path: Path) -> None:
    # Both checkouts share this environment, whose editable install points at the first;
    # run from the second, fedbench reads the second's YAMLs, new ones included.
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    second = tmp_path / "second"
    _copy_tracked(second)
    smoke = (second / "fedbench" / "conf" / "experiment" / "smoke.yaml").read_text()
    (second / "fedbench" / "conf" / "experiment" / "only_here.yaml").write_text(smoke)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    shown = subprocess.run(
        [sys.executable, "-m", "fedbench", "experiment=only_here", "dry_run=true"],
        cwd=second,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    assert f"configs {second / 'fedbench' / 'conf'}," in shown.stdout
    assert f"profiles {second / 'fedbench' / 'device_profiles'}" in shown.stdout
