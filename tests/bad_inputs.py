"""The catalogue of bad inputs: each case, what triggers it, and the error it must give.

`tests/test_bad_inputs.py` runs every case; `python -m tests.bad_inputs`
runs them too and writes docs/bad_inputs.md with the messages actually
printed, so the table in the docs is what users get.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from fedbench.errors import FedbenchError


@dataclass(frozen=True)
class Case:
    name: str
    what: str  # the bad input, as a user would write it
    trigger: Callable[[Path], object]  # raises FedbenchError given a scratch folder
    expect: tuple[str, ...]  # substrings the message must contain


def _profile(tmp: Path, edit: Callable[[dict], None]) -> object:
    from fedbench.devices.profile import load_profile
    from fedbench.paths import profiles_dir

    data = yaml.safe_load((profiles_dir() / "rpi4.yaml").read_text())
    edit(data)
    path = tmp / "rpi4.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_profile(path)


def _fleet(fleet: dict) -> Callable[[Path], object]:
    from fedbench.experiment.fleet import expand_fleet

    return lambda tmp: expand_fleet(fleet)


def _meter(profile: str, knobs: dict | None = None) -> Callable[[Path], object]:
    from fedbench.core.device import DeviceSpec, kind_of
    from fedbench.devices.meters import make_meter

    return lambda tmp: make_meter(DeviceSpec(0, "d", profile, kind_of(profile)), knobs)


def _cifar(tmp: Path, damage: Callable[[Path], None]) -> object:
    from fedbench.data.cifar10 import Cifar10Source
    from fedbench.data.cifar10_files import write_cifar10_like

    write_cifar10_like(tmp, n_train_per_batch=20, n_test=20, seed=0)
    damage(tmp / "cifar-10-batches-py")
    return Cifar10Source(str(tmp), download=False).load((3, 32, 32))


def _reply(edit: Callable[[dict], None]) -> Callable[[Path], object]:
    from fedbench.core.records import RoundReport, from_record, to_record

    def run(tmp: Path) -> object:
        record = to_record(RoundReport(1, 1, 7, "rpi4-000", "rpi4", "emulated", "ok"))
        values = dict(record)
        edit(values)
        from flwr.app import ConfigRecord

        return from_record(ConfigRecord(values))

    return run


def _typed(overrides: list[str]) -> object:
    from fedbench.experiment.compose import experiment_from, resolve
    from tests.test_compose import composed

    return experiment_from(resolve(composed(overrides)), overrides)


def _experiment(*overrides: str) -> Callable[[Path], object]:
    """A command line's overrides, composed by Hydra and validated as the entry point does."""
    return lambda tmp: _typed(list(overrides))


def _preflight(*overrides: str) -> Callable[[Path], object]:
    """A command line's overrides, composed, typed and preflighted as the entry point does."""
    from fedbench.preflight import preflight

    return lambda tmp: preflight(_typed(list(overrides)))  # type: ignore[arg-type]


def _resume(tmp: Path, setup: Callable[[Path], None]) -> object:
    from fedbench.resume import resumed_experiment

    folder = tmp / "run"
    setup(folder)
    return resumed_experiment(folder, _typed(["experiment=smoke", "seed=1"]))  # type: ignore[arg-type]


def _partition(n: int, parts: int, scheme: str = "iid", **params: object) -> Callable:
    from fedbench.data.partition import partition

    labels = np.arange(n) % 10
    return lambda tmp: partition(labels, parts, scheme=scheme, seed=0, params=params)


def _target(group: str, target: str, **kwargs: object) -> Callable[[Path], object]:
    from fedbench.experiment.target import Target

    return lambda tmp: Target.from_config({"_target_": target, **kwargs}, group).build()


def _strategy(target: str, **kwargs: object) -> Callable[[Path], object]:
    return _target("strategy", target, **kwargs)


def _scenario(**kwargs: object) -> Callable[[Path], object]:
    cfg: dict[str, object] = {"days": 2, "new_samples_per_day": 8, **kwargs}
    return _target("scenario", "fedbench.scenarios.daily.DailyScenario", **cfg)


def _model(name: str) -> Callable[[Path], object]:
    from fedbench.models import build_model

    return lambda tmp: build_model(name)


def _profile_file(content: bytes | None) -> Callable[[Path], object]:
    """A profile path holding `content` (None: a directory)."""
    from fedbench.devices.profile import load_profile

    def run(tmp: Path) -> object:
        path = tmp / "board.yaml"
        if content is None:
            path.mkdir()
        else:
            path.write_bytes(content)
        return load_profile(path)

    return run


def _duplicate_key_profile(tmp: Path) -> object:
    from fedbench.devices.profile import load_profile
    from fedbench.paths import profiles_dir

    text = (profiles_dir() / "rpi4.yaml").read_text()
    path = tmp / "rpi4.yaml"
    path.write_text(text.replace("  idle_w: 2.7\n", "  idle_w: 2.7\n  idle_w: 102\n", 1))
    return load_profile(path)


def _damaged_rounds(before: str, after: str) -> Callable[[Path], object]:
    """rounds.csv fingerprinted with `before` on disk, then found holding `after`."""
    from fedbench.report.integrity import RowsIntegrity

    def run(tmp: Path) -> object:
        path = tmp / "rounds.csv"
        path.write_text(before)
        state = RowsIntegrity(path).advance(path.stat().st_size)
        path.write_text(after)
        return RowsIntegrity(path).verify(state)

    return run


def _locked(tmp: Path) -> object:
    import subprocess
    import sys

    from fedbench.report.lock import RunLock

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from fedbench.report.lock import RunLock; RunLock(Path(sys.argv[1])).acquire(); "
            "print('held', flush=True); time.sleep(60)",
            str(tmp),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        return RunLock(tmp).acquire()
    finally:
        holder.kill()
        holder.wait()


def _port_in_use(tmp: Path) -> object:
    import socket

    from fedbench.runtime.deployment import check_port_free

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        return check_port_free("127.0.0.1", s.getsockname()[1])


def _unreachable_ray(tmp: Path) -> object:
    from fedbench.runtime.flower import free_port

    return _target(
        "runtime",
        "fedbench.runtime.simulation.SimulationRuntime",
        ray_address=f"127.0.0.1:{free_port()}",
    )(tmp).preflight(None)  # type: ignore[attr-defined]


def _entry(check: str, value: object) -> Callable[[Path], object]:
    """One of the entry point's own checks (fedbench.__main__, fedbench.cli.gate) on `value`."""
    import fedbench.__main__ as entry

    return lambda tmp: getattr(entry, check)(value)


def _uncreatable_run_dir(tmp: Path) -> object:
    from fedbench.__main__ import check_overrides

    (tmp / "file").write_text("")
    return check_overrides([f"hydra.run.dir={tmp}/file/run"])


def _fresh_into_used(tmp: Path) -> object:
    from fedbench.cli.gate import check_fresh

    (tmp / "rounds.csv").write_text("round\n1\n")
    return check_fresh(tmp)


def _write_folder(with_config: bool, with_ckpt: bool) -> Callable:
    def setup(folder: Path) -> None:
        folder.mkdir()
        if with_config:
            config = _typed(["experiment=smoke", "seed=0"]).to_config()  # type: ignore[attr-defined]
            (folder / "config.yaml").write_text(yaml.safe_dump(config))
        if with_ckpt:
            (folder / "checkpoint.pt").write_bytes(b"not a checkpoint")

    return setup


def _truncate(folder: Path) -> None:
    path = folder / "data_batch_2"
    path.write_bytes(path.read_bytes()[:100])


def _garbage(folder: Path) -> None:
    (folder / "test_batch").write_bytes(pickle.dumps({b"data": "oops"}, protocol=2))


def _set(path: str, value: object) -> Callable[[dict], None]:
    def edit(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for p in parents:
            node = node[p]
        node[last] = value

    return edit


def _drop(path: str) -> Callable[[dict], None]:
    def edit(data: dict) -> None:
        *parents, last = path.split(".")
        node = data
        for p in parents:
            node = node[p]
        del node[last]

    return edit


def _trace_at(make: Callable[[Path], Path]) -> Callable[[Path], object]:
    """An availability trace path that `make` turns into something other than a file."""
    from fedbench.population.traces import AVAILABILITY, read_table

    key = "fleet.population.trace.availability"
    return lambda tmp: read_table(make(tmp), key, AVAILABILITY)


def _symlink_loop(tmp: Path) -> Path:
    loop = tmp / "trace.csv"
    loop.symlink_to(loop)
    return loop


def _submodels(**params: object) -> Callable[[Path], object]:
    return _target("algorithm", "fedbench.algorithms.heterofl.HeteroFL", **params)


CASES: tuple[Case, ...] = (
    Case(
        "profile-typo",
        "device profile key `memroy:` instead of `memory:`",
        lambda t: _profile(t, lambda d: d.__setitem__("memroy", d.pop("memory"))),
        ("rpi4.yaml", "memroy", "memory"),
    ),
    Case(
        "profile-missing",
        "device profile without `thermal.time_constant_s`",
        lambda t: _profile(t, _drop("thermal.time_constant_s")),
        ("rpi4.yaml", "thermal.time_constant_s"),
    ),
    Case(
        "profile-type",
        "device profile `memory.total_mb: four`",
        lambda t: _profile(t, _set("memory.total_mb", "four")),
        ("rpi4.yaml", "memory.total_mb"),
    ),
    Case(
        "profile-unit",
        "device profile `max_freq_ghz: 1500` (MHz where GHz is expected)",
        lambda t: _profile(t, _set("clusters.a72.max_freq_ghz", 1500)),
        ("rpi4.yaml", "clusters.a72.max_freq_ghz", "GHz"),
    ),
    Case(
        "profile-source",
        "device profile number without a `sources:` entry",
        lambda t: _profile(t, lambda d: d["sources"].pop("memory.total_mb")),
        ("rpi4.yaml", "memory.total_mb", "source"),
    ),
    Case(
        "profile-unknown",
        "fleet naming a profile that does not exist (`rpi9`)",
        _meter("rpi9"),
        ("rpi9", "rpi4"),
    ),
    Case(
        "knobs-cores",
        "`fleet.knobs.cores=16` on a 4-core device",
        _meter("rpi4", {"cores": 16}),
        ("cores", "16"),
    ),
    Case("fleet-empty", "`fleet.devices: []`", _fleet({"devices": []}), ("fleet.devices",)),
    Case(
        "fleet-count",
        "`fleet.devices[0].count: 0`",
        _fleet({"devices": [{"profile": "rpi4", "count": 0}]}),
        ("fleet.devices[0].count=0", "must be >= 1"),
    ),
    Case(
        "fleet-group-key",
        "fleet group with `cuont:`",
        _fleet({"devices": [{"profile": "rpi4", "cuont": 2}]}),
        ("fleet.devices[0].cuont", "did you mean 'count'", "count, profile"),
    ),
    Case(
        "fleet-key",
        "fleet with an unknown top-level key `devcies:`",
        _fleet({"devices": [{"profile": "rpi4"}], "devcies": []}),
        ("fleet.devcies", "did you mean 'devices'"),
    ),
    Case(
        "fleet-scale",
        "`fleet.scale: 1` for a fleet of two groups",
        _fleet({"devices": [{"profile": "a"}, {"profile": "b"}], "scale": 1}),
        ("fleet.scale", ">= the number of groups"),
    ),
    Case(
        "fault-kind",
        "`fleet.faults.default.explode: 0.1`",
        lambda t: __import__("fedbench.devices.faults", fromlist=["x"]).fault_models(
            {"default": {"explode": 0.1}}
        ),
        ("explode", "dropout"),
    ),
    Case(
        "fault-prob",
        "`fleet.faults.default.dropout: 1.5`",
        lambda t: __import__("fedbench.devices.faults", fromlist=["x"]).fault_models(
            {"default": {"dropout": 1.5}}
        ),
        ("fleet.faults.default", "[0, 1]"),
    ),
    Case(
        "cifar-missing",
        "`data=cifar10` with no files under `data.source.root`",
        lambda t: (
            __import__("fedbench.data.cifar10", fromlist=["x"])
            .Cifar10Source(str(t / "none"), download=False)
            .load((3, 32, 32))
        ),
        ("data.source.root", "data_batch_1"),
    ),
    Case(
        "cifar-truncated",
        "a truncated `data_batch_2`",
        lambda t: _cifar(t, _truncate),
        ("data_batch_2",),
    ),
    Case(
        "cifar-corrupt",
        "a `test_batch` whose pickle holds the wrong content",
        lambda t: _cifar(t, _garbage),
        ("test_batch",),
    ),
    Case(
        "partition-too-many",
        "more devices (50) than examples (20)",
        _partition(20, 50),
        ("50", "20"),
    ),
    Case(
        "partition-empty",
        "Dirichlet(0.01) over 12 examples and 6 devices (a device gets none)",
        _partition(12, 6, "dirichlet", alpha=0.01, min_partition_size=0),
        ("data.partition.scheme=dirichlet", "get no examples"),
    ),
    Case(
        "reply-missing",
        "a client reply without `energy-j`",
        _reply(lambda v: v.pop("energy-j")),
        ("malformed client reply", "energy-j"),
    ),
    Case(
        "reply-type",
        'a client reply with `num-examples: "64"`',
        _reply(lambda v: v.__setitem__("num-examples", "64")),
        ("malformed client reply", "num-examples", "expected int"),
    ),
    Case(
        "reply-status",
        "a client reply with `status: exploded`",
        _reply(lambda v: v.__setitem__("status", "exploded")),
        ("exploded", "ok, oom, dropped, timeout, failed"),
    ),
    Case(
        "resume-nowhere",
        "`resume=` a folder that does not exist",
        lambda t: __import__("fedbench.resume", fromlist=["x"]).resumed_experiment(
            t / "nowhere", None
        ),
        ("nowhere", "no such run folder"),
    ),
    Case(
        "resume-not-run",
        "`resume=` a folder without config.yaml",
        lambda t: _resume(t, _write_folder(False, False)),
        ("no config.yaml",),
    ),
    Case(
        "resume-other-config",
        "`resume=` a folder run with another seed",
        lambda t: _resume(t, _write_folder(True, True)),
        ("different config", "seed: 0 in the folder, 1 now"),
    ),
    Case(
        "resume-bad-ckpt",
        "`resume=` a folder whose checkpoint.pt is garbage",
        lambda t: (
            _write_folder(True, True)(t / "run"),
            __import__("fedbench.server.checkpoint", fromlist=["x"]).load(t / "run"),
        ),
        ("checkpoint.pt", "not a readable fedbench checkpoint"),
    ),
    Case(
        "strategy-k",
        "`strategy.clients_per_round=0`",
        _strategy("strategies.random.RandomSelection", clients_per_round=0),
        ("clients_per_round must be a positive integer, got 0",),
    ),
    Case(
        "strategy-target",
        "a strategy YAML with `_target_: strategies.nope.Nope`",
        _strategy("strategies.nope.Nope", clients_per_round=2),
        ("strategy._target_", "strategies.nope.Nope"),
    ),
    Case(
        "strategy-param",
        "`strategy=oort strategy.exploration=2`",
        _strategy("strategies.oort.Oort", clients_per_round=2, exploration=2.0),
        ("strategy.exploration",),
    ),
    Case(
        "scenario-days",
        "`scenario.days=0`",
        _scenario(days=0),
        ("scenario.days must be a positive integer, got 0",),
    ),
    Case(
        "scenario-samples",
        "`scenario.new_samples_per_day=-5`",
        _scenario(new_samples_per_day=-5),
        ("scenario.new_samples_per_day", "-5"),
    ),
    Case("scenario-key", "`+scenario.colour=red`", _scenario(colour="red"), ("scenario", "colour")),
    Case("train-lr-nan", "`train.lr=nan`", _experiment("train.lr=nan"), ("train.lr", "finite")),
    Case("train-lr-negative", "`train.lr=-0.1`", _experiment("train.lr=-0.1"), ("train.lr", "> 0")),
    Case(
        "train-batch",
        "`train.batch_size=0`",
        _experiment("train.batch_size=0"),
        ("train.batch_size=0", ">= 1"),
    ),
    Case(
        "train-epochs",
        "`train.local_epochs=0`",
        _experiment("train.local_epochs=0"),
        ("train.local_epochs=0", ">= 1"),
    ),
    Case(
        "train-momentum",
        "`train.momentum=5`",
        _experiment("train.momentum=5"),
        ("train.momentum=5", "< 1"),
    ),
    Case(
        "train-key",
        "`+train.learning_rate=0.1`",
        _experiment("+train.learning_rate=0.1"),
        ("train.learning_rate", "unknown key", "valid:"),
    ),
    Case(
        "train-optimizer",
        "`train.optimizer=sgdm`",
        _experiment("train.optimizer=sgdm"),
        ("train.optimizer='sgdm'", "adam, adamw, sgd"),
    ),
    Case(
        "algorithm-param",
        "`algorithm=fedprox +algorithm.proximal_m=0.1`",
        _experiment("algorithm=fedprox", "+algorithm.proximal_m=0.1"),
        ("algorithm.proximal_m", "did you mean 'proximal_mu'"),
    ),
    Case(
        "algorithm-type",
        "`algorithm=fedprox algorithm.proximal_mu=lots`",
        _experiment("algorithm=fedprox", "algorithm.proximal_mu=lots"),
        ("algorithm.proximal_mu", "must be a number"),
    ),
    Case(
        "algorithm-target",
        "`algorithm._target_=flwr.serverapp.strategy.FedNope`",
        _experiment("algorithm._target_=flwr.serverapp.strategy.FedNope"),
        ("algorithm._target_", "FedNope", "can be imported"),
    ),
    Case(
        "round-close-deadline",
        "`round_close=deadline round_close.deadline_s=-1`",
        lambda t: __import__("fedbench.server.close.base", fromlist=["x"]).build_close(
            _typed(["round_close=deadline", "round_close.deadline_s=-1"])
        ),
        ("round_close.deadline_s=-1", "> 0"),
    ),
    Case(
        "runtime-timeout",
        "`runtime.round_timeout_s=0`",
        lambda t: __import__("fedbench.runtime.base", fromlist=["x"]).build_runtime(
            _typed(["runtime.round_timeout_s=0"])
        ),
        ("runtime.round_timeout_s=0", "> 0"),
    ),
    Case(
        "runtime-accelerator",
        "`runtime.accelerator=tpu`",
        _target("runtime", "fedbench.runtime.simulation.SimulationRuntime", accelerator="tpu"),
        ("runtime.accelerator='tpu'", "auto, cpu, cuda, cuda:N"),
    ),
    Case(
        "runtime-gpus-per-worker",
        "`runtime.gpus_per_worker=2`",
        _target("runtime", "fedbench.runtime.simulation.SimulationRuntime", gpus_per_worker=2),
        ("runtime.gpus_per_worker=2", "(0, 1]"),
    ),
    Case(
        "fleet-huge",
        "`+fleet.scale=50000000`",
        _experiment("+fleet.scale=50000000"),
        ("fleet.scale=50000000", "<= 1,000,000"),
    ),
    Case(
        "scenario-huge",
        "`scenario.days=1000000000`",
        _scenario(days=1_000_000_000),
        ("scenario.days=1000000000", "at most 1,000,000"),
    ),
    Case(
        "app-missing",
        "`app=no/such/app`",
        _experiment("app=no/such/app"),
        ("app=no/such/app", "neither a folder nor an importable module"),
    ),
    Case(
        "model-unknown",
        "`model=densenet41` (asked of the model registry)",
        _model("densenet41"),
        ("densenet41", "densenet40"),
    ),
    Case(
        "profile-duplicate-key",
        "a profile YAML giving `power.idle_w` twice (2.7 and 102)",
        _duplicate_key_profile,
        ("rpi4.yaml:", "'idle_w' is given twice", "give it once"),
    ),
    Case(
        "profile-binary",
        "a profile path that is a binary file",
        _profile_file(bytes(range(256))),
        ("board.yaml", "not a text file"),
    ),
    Case(
        "profile-directory",
        "a profile path that is a directory",
        _profile_file(None),
        ("board.yaml", "a directory, not a profile YAML file"),
    ),
    Case(
        "faults-unknown-profile",
        "`fleet.faults` for a profile the fleet does not have",
        _experiment("fleet=host4", "+fleet.faults={rpi3bplus:{crash:0.5}}"),
        ("fleet.faults.rpi3bplus", "no device of profile 'rpi3bplus'", "valid: default, host"),
    ),
    Case(
        "run-dir-uncreatable",
        "`hydra.run.dir=` a folder that cannot be created (under a file)",
        _uncreatable_run_dir,
        ("hydra.run.dir=", "cannot create or write the folder", "this user can write"),
    ),
    Case(
        "hydra-grammar",
        "`name=my run` unquoted, or `seed=[1,2`",
        _entry("check_overrides", ["seed=[1,2"]),
        ("seed=[1,2", "quote a value", "'name=\"my run\"'"),
    ),
    Case(
        "seed-negative",
        "`seed=-1`",
        _entry("check_seed", -1),
        ("seed=-1", "integer in 0..4,294,967,295"),
    ),
    Case(
        "seed-not-integer",
        "`seed=1.5`",
        _entry("check_seed", 1.5),
        ("seed=1.5", "integer in 0..4,294,967,295"),
    ),
    Case(
        "start-hour-text",
        "`scenario.start_hour=noon`",
        _scenario(start_hour="noon"),
        ("scenario.start_hour", "number", "noon"),
    ),
    Case(
        "ray-unreachable",
        "`runtime.ray_address=` where no Ray cluster answers",
        _unreachable_ray,
        ("runtime.ray_address=127.0.0.1:", "nothing answers", "ray start --head"),
    ),
    Case(
        "port-in-use",
        "`runtime=deployment runtime.port=` a port another program listens on",
        _port_in_use,
        ("runtime.port=", "another program holds it", "null for a free one"),
    ),
    Case(
        "run-folder-locked",
        "a second run into a folder a running one holds",
        _locked,
        ("in use by another fedbench run (pid", "run.lock", "another hydra.run.dir"),
    ),
    Case(
        "run-folder-used",
        "a new run into a folder that holds a finished or killed run",
        _fresh_into_used,
        ("already holds a run (rounds.csv)", "resume="),
    ),
    Case(
        "resume-truncated-rounds",
        "`resume=` a folder whose rounds.csv lost rows after the checkpoint",
        _damaged_rounds("round,device\n1,a\n1,b\n2,a\n2,b\n", "round,device\n1,a\n1,b\n2,a\n"),
        ("rounds.csv: truncated", "first missing line 5 (row 4)"),
    ),
    Case(
        "resume-edited-rounds",
        "`resume=` a folder whose rounds.csv was edited",
        _damaged_rounds(
            "round,device,energy_j\n1,a,3.0\n1,b,4.0\n", "round,device,energy_j\n1,a,3.0\n1,b,0.1\n"
        ),
        ("rounds.csv: line 3 (row 2) differs",),
    ),
    Case(
        "resume-other-runtime",
        "`resume=` a simulation folder with `runtime=deployment`",
        lambda t: _resume_runtime(t),
        ("different config", "runtime._target_"),
    ),
    Case(
        "proxy-unknown",
        "`runtime.proxy=envoy`",
        _target("runtime", "fedbench.runtime.deployment.DeploymentRuntime", proxy="envoy"),
        ("runtime.proxy='envoy'", "auto, nginx, python"),
    ),
    Case(
        "app-evaluate-raises",
        "a user app's `evaluate_fn` raising (refused before the run, naming the app's line)",
        lambda t: _evaluate_fn_raises(t),
        (
            "app my-app: its ServerApp 'raising_server_app:app' raised KeyError at "
            "raising_server_app.py:6: 'accuracy'",
        ),
    ),
    Case(
        "app-import-raises",
        "a user app whose ClientApp module raises while it is imported",
        lambda t: _app_import_raises(t),
        ("app my-app: importing clientapp 'broken_client_app:app' raised RuntimeError",),
    ),
    Case(
        "algorithm-fedyogi-tau",
        "`algorithm=fedyogi algorithm.tau=0`",
        _preflight("experiment=smoke", "algorithm=fedyogi", "algorithm.tau=0"),
        ("algorithm.tau=0: must be > 0",),
    ),
    Case(
        "trimmed-beta",
        "`algorithm=fedtrimmedavg algorithm.beta=0.5` (cuts every update)",
        _preflight("experiment=smoke", "algorithm=fedtrimmedavg", "algorithm.beta=0.5"),
        ("FedTrimmedAvg", "beta", "[0, 0.5)"),
    ),
    Case(
        "fedavgm-momentum",
        "`algorithm=fedavgm algorithm.server_momentum=1`",
        _preflight("experiment=smoke", "algorithm=fedavgm", "algorithm.server_momentum=1"),
        ("algorithm.server_momentum=1", "[0, 1)"),
    ),
    Case(
        "deployment-host-name",
        "`runtime=deployment runtime.address=server.lan` (a name, not an address)",
        lambda t: __import__("fedbench.runtime.deployment", fromlist=["x"]).check_address(
            "server.lan"
        ),
        ("runtime.address='server.lan': not an IP address", "runtime.advertise"),
    ),
    Case(
        "plot-is-a-folder",
        "`fedbench.fleet describe plot=` an existing folder",
        lambda t: __import__("fedbench.folders", fromlist=["x"]).check_file("plot", t),
        ("plot=<tmp>: a folder, not a file",),
    ),
    Case(
        "trace-folder",
        "`fleet.population.trace.availability=` a folder",
        _trace_at(lambda t: t),
        ("a folder, not a trace file",),
    ),
    Case(
        "trace-device",
        "`fleet.population.trace.availability=/dev/zero`",
        _trace_at(lambda t: Path("/dev/zero")),
        ("'/dev/zero': a character device, not a regular file",),
    ),
    Case(
        "trace-symlink-loop",
        "`fleet.population.trace.availability=` a symbolic link to itself",
        _trace_at(_symlink_loop),
        ("a loop of symbolic links",),
    ),
    Case(
        "rates-unsorted",
        "`algorithm=heterofl algorithm.rates=[0.5,1.0]`",
        _submodels(rates=[0.5, 1.0]),
        ("algorithm.rates=[0.5, 1.0]: not largest first", "algorithm.rates=[1.0, 0.5]"),
    ),
    Case(
        "pretrain-momentum",
        "`scenario.pretrain.momentum=1`",
        _scenario(pretrain={"momentum": 1.0}),
        ("scenario.pretrain.momentum=1.0: must be a finite number >= 0 and < 1",),
    ),
    Case(
        "physical-keys-number",
        "`runtime=deployment runtime.physical_keys=5`",
        _target("runtime", "fedbench.runtime.deployment.DeploymentRuntime", physical_keys=5),
        ("runtime.physical_keys=5: a public key file (.pub), or a list of them",),
    ),
    Case(
        "defense-ratio",
        "`defense.max_norm_ratio=0.5` (must exceed 1)",
        _experiment("defense.max_norm_ratio=0.5"),
        ("defense.max_norm_ratio=0.5", "> 1"),
    ),
)


def _evaluate_fn_raises(tmp: Path) -> object:
    """A ServerApp whose evaluate_fn raises as Strategy.start scores the initial model."""
    from fedbench.experiment.app import AppConfig
    from fedbench.server.capture import first_send

    (tmp / "raising_server_app.py").write_text(
        "from flwr.app import ArrayRecord\n"
        "from flwr.serverapp import ServerApp\n"
        "from flwr.serverapp.strategy import FedAvg\n"
        "app = ServerApp()\n"
        "def evaluate(server_round, arrays):\n"
        "    raise KeyError('accuracy')\n"
        "@app.main()\n"
        "def main(grid, context):\n"
        "    FedAvg().start(grid, ArrayRecord(), evaluate_fn=evaluate)\n"
    )
    app = AppConfig(
        root=str(tmp), clientapp="x:app", serverapp="raising_server_app:app", name="my-app"
    )
    return first_send(app, 3)


def _app_import_raises(tmp: Path) -> object:
    from flwr.clientapp import ClientApp

    from fedbench.experiment.app import AppConfig

    (tmp / "broken_client_app.py").write_text("raise RuntimeError('no GPU found')\n")
    app = AppConfig(root=str(tmp), clientapp="broken_client_app:app", name="my-app")
    return app.load(app.clientapp, ClientApp, "clientapp")


def _resume_runtime(tmp: Path) -> object:
    from fedbench.resume import resumed_experiment

    folder = tmp / "run"
    _write_folder(True, True)(folder)
    return resumed_experiment(folder, _typed(["experiment=smoke", "runtime=deployment"]))  # type: ignore[arg-type]


def run_case(case: Case) -> str:
    """The error message a case gives (AssertionError if it gives none)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            case.trigger(Path(tmp))
        except FedbenchError as exc:
            # Paths of this machine are not part of the message a user reads in the docs.
            root = str(Path(__file__).resolve().parents[1])
            return str(exc).replace(tmp, "<tmp>").replace(root, "<fedbench>")
    raise AssertionError(f"{case.name}: no FedbenchError for {case.what}")


def _this_commit() -> str:
    """This checkout's commit, which a message may name (docs/bad_inputs.md says <this commit>)."""
    from fedbench.report.provenance import git_commit, is_commit

    commit, _ = git_commit()
    return commit if is_commit(commit) else "\0"  # outside git: nothing to replace


def write_table(path: Path) -> None:
    lines = [
        "# Bad inputs and the errors they get",
        "",
        "Generated by `python -m tests.bad_inputs` from the cases `tests/test_bad_inputs.py`",
        "and `tests/test_errors.py` run; every message is the one a user sees (one line,",
        "exit code 2 on the command line). Command-line cases are listed after the table.",
        "",
        "| # | bad input | error |",
        "|---|---|---|",
    ]
    for i, case in enumerate(CASES, 1):
        message = run_case(case).replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {i} | {case.what} | {message} |")
    from tests.test_errors import CASES as CLI
    from tests.test_errors import run_cases

    lines += [
        "",
        "## On the command line (`tests/test_errors.py`)",
        "",
        "Each command runs as its own process in an empty folder and must print exactly this",
        "one line on stderr, exit with code 2 and leave the folder empty (no",
        "`outputs/<date>/<time>/`). `{fx}` is a folder with the file the case needs. The test",
        "appends `dry_run=true` to `python -m fedbench` (a case that were not refused would stop",
        "after its checks instead of running); the refusal is the same without it.",
        "",
        "| # | command | error |",
        "|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        outcomes = run_cases(CLI, Path(tmp))
        for i, case in enumerate(CLI, len(CASES) + 1):
            outcome = outcomes[case.name]
            message = outcome.result.stderr.strip().replace(str(outcome.fx), "{fx}")
            message = message.replace(str(Path(__file__).resolve().parents[1]), "<fedbench>")
            message = message.replace(_this_commit(), "<this commit>")
            shown = case.shown.replace(str(Path(__file__).resolve().parents[1]), "<fedbench>")
            shown = f"`{shown}`" + (f" ({case.what})" if case.what else "")
            cell = message.replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {i} | {shown.replace('|', chr(92) + '|')} | {cell} |")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    write_table(Path(__file__).resolve().parents[1] / "docs" / "bad_inputs.md")
