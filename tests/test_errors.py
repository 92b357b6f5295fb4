"""User mistakes on the command line: one line naming the value and what is valid, exit code 2,
no traceback, and no run folder left behind.

Every case runs as its own process (tests.cli_runner: one interpreter start for
all of them) in an empty working folder, which must still be empty afterwards:
a refused `python -m fedbench` leaves no `outputs/<date>/<time>/`. The cases of
`python -m fedbench` get `dry_run=true` appended, so a case that is not refused
stops after its checks instead of running; a refusal is the same either way.
`python -m tests.bad_inputs` lists them in docs/bad_inputs.md with the line
each one prints.
"""

from __future__ import annotations

import os
import pickle
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

from tests.cli_runner import Command, Result, run_commands
from tests.helpers import run_fedbench

ROOT = Path(__file__).resolve().parents[1]
PROG = {"fedbench.cli.main": "fedbench"}  # else the module's name starts its error line


@dataclass(frozen=True)
class CliCase:
    """`python -m <module> <args>`; `{fx}` in an argument is the case's fixtures folder."""

    name: str
    args: tuple[str, ...]
    expect: tuple[str, ...]  # substrings of the one line it must print
    module: str = "fedbench"
    env: tuple[tuple[str, str], ...] = ()
    setup: Callable[[Path], object] | None = field(default=None, compare=False)
    what: str = ""  # what the fixture holds, where the command alone does not say

    def command(self, fx: Path, cwd: Path) -> Command:
        args = tuple(a.replace("{fx}", str(fx)) for a in self.args)
        if self.module == "fedbench":
            args += ("dry_run=true",)
        env = tuple((k, v.replace("{fx}", str(fx))) for k, v in self.env)
        return Command(self.module, args, str(cwd), env)

    @property
    def shown(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env)
        command = shlex.join(["python", "-m", self.module, *self.args])
        return f"{env} {command}".strip()


# --- fixtures, made in the case's own folder -----------------------------------------------


def _a_file(fx: Path) -> None:
    (fx / "afile").write_text("not a folder\n")


def _one_class_cifar(fx: Path) -> None:
    from fedbench.data.cifar10_files import write_cifar10_like

    folder = write_cifar10_like(fx / "oneclass", n_train_per_batch=20, n_test=20, seed=0)
    for batch in folder.iterdir():
        if batch.name.startswith(("data_batch", "test_batch")):
            data = pickle.loads(batch.read_bytes(), encoding="bytes")
            data[b"labels"] = [3] * len(data[b"labels"])
            batch.write_bytes(pickle.dumps(data, protocol=2))


def _trace(text: bytes) -> Callable[[Path], None]:
    return lambda fx: (fx / "trace.csv").write_bytes(text)


def _run_folder(damage: Callable[[Path], object]) -> Callable[[Path], None]:
    from tests.analyze.folders import Device, make_folder

    def setup(fx: Path) -> None:
        run = make_folder(
            fx / "run",
            {1: [Device("rpi4-000", "ok", 3.0, 1.0)], 2: [Device("rpi4-001", "ok", 3.0, 1.0)]},
            {1: 0.5, 2: 0.6},
        )
        damage(run)

    return setup


def _keys(fx: Path) -> None:
    from fedbench.security import issue_node_key

    key = issue_node_key(fx / "keys", "pi")
    (fx / "pi.key.before").write_bytes(key.private_key.read_bytes())


def _not_a_certificate(fx: Path) -> None:
    (fx / "ca.pem").write_text("hello, I am no certificate\n")


def _fifo(fx: Path) -> None:
    os.mkfifo(fx / "trace.csv")


def _linked(name: str, config: bool = False) -> Callable[[Path], None]:
    """A run folder `fx/run` whose `name` is a symbolic link to `fx/notes.txt` (issue 48)."""

    def setup(fx: Path) -> None:
        run = fx / "run"
        run.mkdir()
        if config:  # a run killed before its first round: resumable
            from fedbench.experiment.config_file import config_yaml
            from tests.test_compose import typed

            (run / "config.yaml").write_text(config_yaml(typed([])))  # the default, as composed
        (fx / "notes.txt").write_text("keep me\n")
        (run / name).symlink_to(fx / "notes.txt")

    return setup


def _resumable(edit: Callable[[dict], object] | None = None, text: str = "") -> Callable:
    """A run folder `fx/run` killed before its first round, its config.yaml edited (issue 48)."""

    def setup(fx: Path) -> None:
        import yaml

        from tests.test_compose import typed

        run = fx / "run"
        run.mkdir()
        config = typed([]).to_config()  # the default, as composed
        if edit is not None:
            edit(config)
        (run / "config.yaml").write_text(text or yaml.safe_dump(config, sort_keys=False))

    return setup


def _other_models_checkpoint(fx: Path) -> None:
    """`fx/run` (the default config) with a checkpoint of a wider small_cnn, signed with
    this account's key: it passes the HMAC (issue 48, item 8)."""
    from fedbench.models.small_cnn import SmallCNN
    from fedbench.server import checkpoint

    _resumable()(fx)
    arrays = dict(SmallCNN(in_channels=3, num_classes=10, width=32).state_dict())
    ckpt = checkpoint.Checkpoint(1, 0.0, 1, arrays, {}, {}, {}, {}, checkpoint.rng_state())
    checkpoint.save(fx / "run", ckpt)


OTHER_COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _other_commits_folder(fx: Path) -> None:
    """`fx/run` whose summary.json says another commit (and version) made it (item 8)."""
    import json

    _resumable()(fx)
    provenance = {"git_commit": OTHER_COMMIT, "fedbench_version": "0.0.1"}
    (fx / "run" / "summary.json").write_text(json.dumps({"provenance": provenance}))


def _sparse_trace(fx: Path) -> None:
    with (fx / "trace.csv").open("wb") as f:
        f.truncate(2 * 1024**3)  # a hole: no disk used


# Ten values, each level ten aliases of the one before: 10^9 values in about 1 KB.
ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 10)}]\n"
    for a, b in zip("abcdefgh", "bcdefghi", strict=True)
)


def _run_and_file(fx: Path) -> None:
    _run_folder(lambda r: None)(fx)
    _a_file(fx)


def _header_only(run: Path) -> None:
    rounds = run / "rounds.csv"
    rounds.write_text(rounds.read_text().splitlines()[0] + "\n")


def _infinite_accuracy(run: Path) -> None:
    import json

    summary = json.loads((run / "summary.json").read_text())
    summary["days"][-1]["accuracy"] = float("inf")
    (run / "summary.json").write_text(json.dumps(summary))


def _describe(name: str, args: tuple[str, ...], expect: str) -> CliCase:
    return CliCase(name, ("describe", *args), (expect,), "fedbench.fleet")


def _analyze(name: str, damage: Callable[[Path], object], expect: str, what: str) -> CliCase:
    """`fedbench.analyze` on a run folder that `damage` spoilt."""
    args = ("{fx}/run", "figures=false")
    return CliCase(name, args, (expect,), "fedbench.analyze", setup=_run_folder(damage), what=what)


def _smoke(*extra: str) -> tuple[str, ...]:
    return ("experiment=smoke", *extra)


CASES: tuple[CliCase, ...] = (
    # Hydra's group lookup and override parser
    CliCase("experiment-nope", ("experiment=nope",), ("experiment=nope", "daily_densenet")),
    CliCase("experiment-typo", ("experiment=smok",), ("experiment=smok", "did you mean 'smoke'")),
    CliCase("strategy-nope", ("strategy=nope",), ("strategy=nope", "random")),
    CliCase("strategy-typo", ("strategy=orrt",), ("strategy=orrt", "did you mean 'oort'")),
    CliCase("model-nope", ("model=nope",), ("model=nope", "densenet40")),
    CliCase("data-nope", ("data=nope",), ("data=nope", "digits", "cifar10")),
    CliCase("algorithm-nope", ("algorithm=nope",), ("algorithm=nope", "fedprox")),
    CliCase(
        "key-typo",
        ("scenario.dayz=5",),
        ("scenario.dayz=5: unknown key", "did you mean 'days'"),
    ),
    CliCase("train-key-typo", ("train.lrr=0.1",), ("train.lrr=0.1", "did you mean 'lr'")),
    CliCase("top-key-typo", ("seeed=1",), ("seeed=1", "did you mean 'seed'")),
    CliCase(
        "key-elsewhere",
        ("train.deadline_s=-5",),
        ("train.deadline_s=-5: unknown key", "'deadline_s' is a key of round_close=deadline"),
    ),
    CliCase(
        "plus-existing",
        ("+scenario.days=3",),
        ("+scenario.days: scenario.days already exists", "without the +"),
    ),
    CliCase("tilde-missing", ("~scenario.nope",), ("~scenario.nope: no such key to delete",)),
    CliCase(
        "interpolation",
        ("seed=${nope}",),
        ("seed: Interpolation key 'nope' not found",),
    ),
    CliCase("grammar", ("seed=[1,2",), ("cannot read the override 'seed=[1,2'", "quote a value")),
    CliCase(
        "run-dir-proc",
        ("hydra.run.dir=/proc/fedbench/run",),
        ("hydra.run.dir=/proc/fedbench/run: cannot create or write",),
    ),
    CliCase("run-dir-empty", ("hydra.run.dir=",), ("hydra.run.dir= is empty",)),
    CliCase(
        "sweep-bad-job",
        ("-m", "scenario.days=1,0"),
        ("sweep job 2/2 (scenario.days=0", "scenario.days must be a positive integer"),
    ),
    # the typed experiment and preflight
    CliCase(
        "clients-per-round",
        ("strategy.clients_per_round=9",),
        ("clients_per_round=9 is larger than the fleet (4 devices)", "1..4"),
    ),
    CliCase(
        "clients-zero",
        ("strategy.clients_per_round=0",),
        ("clients_per_round must be a positive integer, got 0",),
    ),
    CliCase("days-zero", ("scenario.days=0",), ("scenario.days must be a positive integer",)),
    CliCase("days-negative", ("scenario.days=-3",), ("scenario.days must be a positive", "-3")),
    CliCase(
        "samples-zero",
        ("scenario.new_samples_per_day=0",),
        ("scenario.new_samples_per_day must be a positive integer, got 0",),
    ),
    CliCase("scenario-plus-key", ("+scenario.colour=red",), ("scenario", "colour")),
    CliCase(
        "fleet-count", ("fleet.devices.0.count=0",), ("fleet.devices[0].count=0: must be >= 1",)
    ),
    CliCase("lr-nan", ("train.lr=nan",), ("train.lr must be a finite number, got nan",)),
    CliCase(
        "algorithm-param",
        ("algorithm=fedprox", "+algorithm.mu=1"),
        ("algorithm.mu", "did you mean 'proximal_mu'"),
    ),
    CliCase("app-nowhere", ("app=no/such/app",), ("app=no/such/app: neither a folder",)),
    CliCase(
        "cifar-missing",
        ("data=cifar10", "data.source.root={fx}/no-cifar", "data.source.download=false"),
        ("CIFAR-10 not found", "data.source.root="),
    ),
    CliCase(
        "natural-id-fleet",
        ("data=shakespeare",),
        ("data.partition.scheme=natural_id", "gives 630 partitions", "+fleet.scale=630"),
    ),
    CliCase(
        "partition-key",
        ("data.partition.scheme=shard", "data.partition.alpha=0.5"),
        ("data.partition.alpha=0.5: not a parameter of scheme shard",),
    ),
    CliCase(
        "hf-missing",
        ("data=hf", "data.name={fx}/no-such-set", "data.num_classes=3"),
        ("no-such-set",),
        env=(("HF_DATASETS_OFFLINE", "1"),),
    ),
    CliCase(
        "text-model-on-images",
        ("model=char_lstm",),
        ("model input shape (80,)", "data=digits holds images"),
    ),
    CliCase(
        "data-root-file",
        ("data=cifar10",),
        ("data.source.root=", "is a file, not a folder", "FEDBENCH_DATA"),
        env=(("FEDBENCH_DATA", "{fx}/afile"),),
        setup=_a_file,
    ),
    CliCase(
        "one-class",
        ("data=cifar10", "data.source.root={fx}/oneclass", "data.source.download=false"),
        ("holds 1 class(es)", "at least 2"),
        setup=_one_class_cifar,
        what="CIFAR-10 files whose labels are all 3",
    ),
    CliCase(
        "ray-temp-file",
        ("runtime.ray_temp_dir={fx}/afile",),
        ("runtime.ray_temp_dir=", "a file, not a folder"),
        setup=_a_file,
    ),
    CliCase(
        "deployment-address",
        ("runtime=deployment", "runtime.address=192.0.2.1"),
        ("runtime.address=192.0.2.1: this host cannot listen there",),
    ),
    CliCase(
        "app-start-raises",
        (f"app={ROOT}/tests/apps/failing_start", "scenario=rounds"),
        (
            "app failing-start-app: its ServerApp",
            "raised ValueError at ",
            ": evaluation data missing",
        ),
    ),
    CliCase(
        "app-run-config-type",
        (f"app={ROOT}/tests/apps/quickstart", "+app_run_config.lr=fast", "scenario=rounds"),
        ("app_run_config.lr='fast': expected a number",),
    ),
    CliCase(
        "trace-malformed",
        ("fleet=phones_100", "fleet.population.trace.availability={fx}/trace.csv"),
        ("column start_s",),
        setup=_trace(b"device,start_s,end_s,state\n0,abc,100,available\n"),
        what="a trace whose start_s is 'abc'",
    ),
    CliCase(
        "trace-short-row",
        ("fleet=phones_100", "fleet.population.trace.availability={fx}/trace.csv"),
        ("line 3 has 2 value(s), the header 4",),
        setup=_trace(b"device,start_s,end_s,state\n0,0,100,available\n1,5\n"),
        what="a trace with a short row",
    ),
    CliCase(
        "trace-binary",
        ("fleet=phones_100", "fleet.population.trace.availability={fx}/trace.csv"),
        ("not a text CSV file",),
        setup=_trace(bytes(range(256)) * 8),
        what="a binary trace",
    ),
    CliCase(
        "batch-larger-than-data",
        ("train.batch_size=100000",),
        ("train.batch_size=100000 is larger than any device's data",),
    ),
    CliCase(
        "server-fraction-zero",
        ("data.server_fraction=0",),
        ("data.server_fraction=0 leaves the server no data", "scenario.pretrain.epochs=0"),
    ),
    CliCase(
        "fedadam-eta-zero",
        _smoke("algorithm=fedadam", "algorithm.eta=0"),
        ("algorithm.eta=0: must be > 0",),
    ),
    CliCase(
        "fedadam-beta",
        _smoke("algorithm=fedadam", "algorithm.beta_1=2"),
        ("algorithm.beta_1=2: must be in [0, 1)",),
    ),
    CliCase(
        "krum-malicious",
        _smoke("algorithm=krum", "algorithm.num_malicious_nodes=10"),
        ("algorithm.num_malicious_nodes=10: Krum tolerates", "a round picks 3"),
    ),
    CliCase(
        "first-k-too-large",
        _smoke("round_close=first_k", "round_close.k=10"),
        ("round_close.k=10 is larger than the devices a round picks (3",),
    ),
    CliCase(
        "fedbuff-buffer",
        _smoke("mode=fedbuff", "mode.buffer_size=10"),
        ("mode.buffer_size=10 is larger than the fleet (3 devices)",),
    ),
    CliCase(
        "fedbuff-concurrency",
        _smoke("mode=fedbuff", "mode.buffer_size=2", "mode.concurrency=100000"),
        ("mode.concurrency=100000 is larger than the fleet (3 devices)",),
    ),
    CliCase(
        "fedbuff-hang",
        _smoke("mode=fedbuff", "mode.buffer_size=1000000"),
        ("mode.buffer_size=1000000 is larger than the fleet",),
    ),
    CliCase(
        "replay-days-huge",
        ("scenario.replay_days=100000000",),
        ("scenario.replay_days=100000000: at most scenario.days - 1 = 2",),
    ),
    CliCase(
        "replay-days-float",
        ("scenario.replay_days=1e8",),
        ("scenario.replay_days must be an integer",),
    ),
    # issue 48, item 8
    CliCase(
        "trace-fifo",
        ("fleet=phones_100", "fleet.population.trace.availability={fx}/trace.csv"),
        ("a named pipe (FIFO), not a regular file",),
        setup=_fifo,
        what="the trace is a FIFO: refused, never opened",
    ),
    CliCase(
        "gpus-per-worker-cpu",
        ("runtime.accelerator=cpu", "runtime.gpus_per_worker=0.5"),
        ("runtime.gpus_per_worker=0.5 with runtime.accelerator=cpu",),
    ),
    CliCase(
        "rates-twice",
        _smoke("algorithm=heterofl", "algorithm.rates=[0.5,0.5]"),
        ("algorithm.rates=[0.5, 0.5]: 0.5 is given twice", "largest first"),
    ),
    CliCase(
        "deadline-tiny",
        ("round_close=deadline", "round_close.deadline_s=1e-9"),
        ("round_close.deadline_s=1e-09: shorter than any round trip", ">= 0.001"),
    ),
    CliCase(
        "pretrain-lr-nan",
        ("scenario.pretrain.lr=nan",),
        ("scenario.pretrain.lr=nan: must be a finite number > 0 and <= 1,000",),
    ),
    CliCase("resume-empty", ("resume=",), ("resume= is empty: give the run folder",)),
    CliCase(
        "bench-batch-huge",
        ("device=rpi4", "model=resnet18", "batch_size=10000000"),
        ("batch_size=10000000: one batch of resnet18's inputs", "choose batch_size 1.."),
        module="fedbench.bench",
    ),
    CliCase(
        "analyze-out-file",
        ("{fx}/run", "out={fx}/afile", "figures=false"),
        ("out={fx}/afile: a file, not a folder",),
        module="fedbench.analyze",
        setup=_run_and_file,
        what="out= names an existing file",
    ),
    _analyze(
        "analyze-header-only-rounds",
        _header_only,
        "rounds.csv: holds only its header, but the run went to round 2",
        "rounds.csv holds only its header",
    ),
    _analyze(
        "analyze-infinite-accuracy",
        _infinite_accuracy,
        "summary.json: days[1].accuracy=inf: not an accuracy in [0, 1]",
        "summary.json gives accuracy inf",
    ),
    # the other entry points
    _describe("describe-unknown-fleet", ("fleet=nofleet",), "fleet=nofleet: no such option"),
    _describe(
        "describe-plot",
        ("fleet=host3", "plot=/proc/fedbench/population.png"),
        "plot=/proc/fedbench/population.png: cannot create or write",
    ),
    _describe("describe-key", ("fleet=host3", "seeed=1"), "seeed=1: unknown key (did you mean"),
    _describe("describe-flag", ("--verbose",), "--verbose: not an option"),
    _analyze(
        "analyze-garbage-rounds",
        lambda r: (r / "rounds.csv").write_text('not, "a\nrounds file\n'),
        "rounds.csv: not a rounds.csv fedbench wrote (no column round",
        "rounds.csv is garbage text",
    ),
    _analyze(
        "analyze-binary-rounds",
        lambda r: (r / "rounds.csv").write_bytes(bytes(range(256)) * 4),
        "rounds.csv: not a rounds.csv fedbench wrote (not text)",
        "rounds.csv is binary",
    ),
    _analyze(
        "analyze-corrupt-summary",
        lambda r: (r / "summary.json").write_text('{"status": "compl'),
        "summary.json: not valid JSON",
        "summary.json is cut short",
    ),
    _analyze(
        "analyze-list-summary",
        lambda r: (r / "summary.json").write_text("[1, 2, 3]"),
        "summary.json: a JSON list, not the object fedbench writes",
        "summary.json is a list",
    ),
    CliCase(
        "tls-bad-host",
        ("issue-tls", "out={fx}/tls", "host=bad host!"),
        ("'bad host!' is neither an IP address nor a DNS name",),
        module="fedbench.security",
    ),
    CliCase(
        "credentials-overwrite",
        ("issue-credentials", "out={fx}/keys", "name=pi"),
        ("pi.key already exists", "force=true"),
        module="fedbench.device",
        setup=_keys,
        what="a second time: the key pair exists",
    ),
    CliCase(
        "device-not-a-certificate",
        ("superlink=127.0.0.1:9", "root_certificates={fx}/ca.pem", "--max-wait-s", "5"),
        ("root_certificates=", "not a PEM certificate"),
        module="fedbench.device",
        setup=_not_a_certificate,
        what="ca.pem holds no certificate",
    ),
    # issue 48, round two: a run folder is written into, never through a link
    CliCase(
        "run-folder-link",
        ("experiment=smoke", "hydra.run.dir={fx}/run"),
        ("{fx}/run/console.log is a symbolic link: fedbench writes into a run folder, never",),
        setup=_linked("console.log"),
        what="the pre-made run folder's console.log links to another file",
    ),
    CliCase(
        "resume-lock-link",
        ("resume={fx}/run",),
        ("{fx}/run/run.lock is a symbolic link: fedbench writes into a run folder, never",),
        setup=_linked("run.lock", config=True),
        what="the folder's run.lock links to another file",
    ),
    # issue 48, round two: an allowlisted class's arguments; resource bombs
    CliCase(
        "resume-mlflow-url",
        ("resume={fx}/run",),
        ("config.yaml: report.loggers[0].tracking_uri='http://collector.example:5000' is a URL",),
        setup=_resumable(
            lambda c: c["report"].update(
                loggers=[
                    {
                        "_target_": "fedbench.report.loggers.MlflowLogger",
                        "tracking_uri": "http://collector.example:5000",
                    }
                ]
            )
        ),
        what="the folder's config.yaml logs to an MLflow server of its own",
    ),
    CliCase(
        "resume-log-dir-outside",
        ("resume={fx}/run",),
        ("config.yaml: report.loggers[0].log_dir='/tmp' is /tmp, outside the run folder",),
        setup=_resumable(
            lambda c: c["report"].update(
                loggers=[
                    {"_target_": "fedbench.report.loggers.TensorBoardLogger", "log_dir": "/tmp"}
                ]
            )
        ),
        what="the folder's config.yaml has TensorBoard write to /tmp",
    ),
    CliCase(
        "resume-alias-bomb",
        ("resume={fx}/run",),
        ("config.yaml: line 5: its aliases expand to more than 100,000 values (an alias bomb)",),
        setup=_resumable(text=ALIAS_BOMB),
        what="config.yaml is a 1 KB YAML alias bomb",
    ),
    CliCase(
        "trace-sparse-2gb",
        ("fleet=phones_100", "fleet.population.trace.availability={fx}/trace.csv"),
        ("trace.csv': 2 GiB, more than the 256 MiB a trace CSV may be",),
        setup=_sparse_trace,
        what="a 2 GB sparse trace",
    ),
    # issue 48, round two, item 8: a resumed run is the run it was
    CliCase(
        "resume-other-model",
        ("resume={fx}/run",),
        (
            "{fx}/run/checkpoint.pt: model array 'features.0.weight' is 32x3x3x3 float32, but "
            "the folder's model (config.yaml) has it as 16x3x3x3 float32: a checkpoint of "
            "another model",
        ),
        setup=_other_models_checkpoint,
        what="the folder's checkpoint.pt, signed with this account's key, holds a wider model",
    ),
    CliCase(
        "resume-other-commit",
        ("resume={fx}/run",),
        ("resume={fx}/run: the run was made by ", "give resume_any_commit=true to continue"),
        setup=_other_commits_folder,
        what="the folder's summary.json says another fedbench commit made it",
    ),
)

# Commands the README and the config headers give: they must run as written (checked up to
# the start of the run with dry_run=true).
WORKS: tuple[CliCase, ...] = (
    CliCase(
        "readme-overcommit",
        (
            "experiment=study_rounds",
            "algorithm=fedadam",
            "round_close=first_k",
            "strategy.overcommit=0.3",
        ),
        ("config ok: study_rounds",),
    ),
    CliCase(
        "first-k-header",
        ("round_close=first_k", "strategy.overcommit=0.3"),
        ("config ok: default",),
    ),
    CliCase(
        "sweep-dry-run",
        ("-m", "strategy=random,oort"),
        ("job 2/2 (strategy=oort", "config ok: default would write"),
    ),
    CliCase(
        "describe-help",
        ("describe", "--help"),
        ("usage: python -m fedbench.fleet describe",),
        module="fedbench.fleet",
    ),
    CliCase(
        "fedbench-fleet",
        ("fleet", "describe", "--help"),
        ("usage: python -m fedbench.fleet describe",),
        module="fedbench.cli.main",
    ),
    CliCase(
        "fedbench-security",
        ("security", "--help"),
        ("python -m fedbench.security issue-tls",),
        module="fedbench.cli.main",
    ),
)


@dataclass(frozen=True)
class Outcome:
    result: Result
    left: tuple[str, ...]  # what the command left in its (empty) working folder
    fx: Path


def run_cases(cases: tuple[CliCase, ...], root: Path) -> dict[str, Outcome]:
    """Run every case (one interpreter start for all) in `root`/<name>/."""
    commands, places = [], []
    for case in cases:
        fx, cwd = root / case.name / "fx", root / case.name / "cwd"
        fx.mkdir(parents=True)
        cwd.mkdir()
        if case.setup is not None:
            case.setup(fx)
        commands.append(case.command(fx, cwd))
        places.append((fx, cwd))
    results = run_commands(commands)
    return {
        case.name: Outcome(result, tuple(p.name for p in cwd.iterdir()), fx)
        for case, result, (fx, cwd) in zip(cases, results, places, strict=True)
    }


@cache
def _outcomes() -> dict[str, Outcome]:
    root = Path(tempfile.mkdtemp(prefix="fedbench-errors-"))
    return run_cases(CASES + WORKS, root)


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    return _outcomes()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_mistake_is_one_line_exit_2_and_leaves_no_folder(
    case: CliCase, outcomes: dict[str, Outcome]
) -> None:
    outcome = outcomes[case.name]
    err = outcome.result.stderr.strip()
    assert outcome.result.code == 2, (outcome.result.code, err[-3000:])
    assert len(err.splitlines()) == 1, err[-3000:]
    assert err.startswith(PROG.get(case.module, case.module)) and ": error: " in err, err
    for text in case.expect:
        assert text.replace("{fx}", str(outcome.fx)) in err, (text, err)
    assert outcome.left == (), f"left behind in the working folder: {outcome.left}"


def test_nothing_is_written_for_a_refused_tls_host(outcomes: dict[str, Outcome]) -> None:
    assert not (outcomes["tls-bad-host"].fx / "tls").exists()


@pytest.mark.parametrize("name", ["run-folder-link", "resume-lock-link"])
def test_a_linked_file_in_a_run_folder_is_left_as_it_was(
    name: str, outcomes: dict[str, Outcome]
) -> None:
    fx = outcomes[name].fx
    assert (fx / "notes.txt").read_text() == "keep me\n"
    assert sorted(p.name for p in (fx / "run").iterdir()) in (
        ["console.log"],
        ["config.yaml", "run.lock"],
    )


def test_the_refused_key_overwrite_kept_the_old_key(outcomes: dict[str, Outcome]) -> None:
    fx = outcomes["credentials-overwrite"].fx
    assert (fx / "keys" / "pi.key").read_bytes() == (fx / "pi.key.before").read_bytes()


@pytest.mark.parametrize("case", WORKS, ids=[c.name for c in WORKS])
def test_documented_commands_work(case: CliCase, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[case.name]
    assert outcome.result.code == 0, outcome.result.stderr[-3000:]
    for text in case.expect:
        assert text in outcome.result.stdout, outcome.result.stdout[-3000:]
    assert outcome.left == ()


def test_a_refused_run_leaves_no_outputs_folder(tmp_path: Path) -> None:
    """As a user runs it, no dry run: Hydra's default outputs/<date>/<time>/ is never made."""
    proc = subprocess.run(
        [sys.executable, "-m", "fedbench", "scenario.dayz=5"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**os.environ, "FLWR_TELEMETRY_ENABLED": "0"},
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "fedbench: error: scenario.dayz=5: unknown key (did you mean 'days'?); valid in "
        "scenario: days, new_samples_per_day, pretrain, replay_days, rounds_per_day, start_hour"
    ]
    assert list(tmp_path.iterdir()) == []


def test_missing_cifar_names_the_data_root(tmp_path: Path) -> None:
    """Without dry_run and with a run folder given: refused before the folder exists."""
    root = tmp_path / "no-cifar-here"
    proc = run_fedbench(
        ["data=cifar10", f"data.source.root={root}", "data.source.download=false"],
        tmp_path / "run",
        timeout=300,
    )
    assert proc.returncode == 2
    assert "data.source.root" in proc.stderr and str(root) in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("tpu", "runtime.accelerator='tpu': valid: auto, cpu, cuda, cuda:N"),
        ("cuda", "runtime.accelerator=cuda: torch sees no CUDA GPU on this host"),
    ],
)
def test_an_accelerator_this_host_lacks_never_makes_a_run_folder(
    value: str, expected: str, tmp_path: Path
) -> None:
    import torch

    if value == "cuda" and torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    run_dir = tmp_path / "run"
    proc = run_fedbench(["experiment=smoke", f"runtime.accelerator={value}"], run_dir, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert expected in proc.stderr and "\n" not in proc.stderr.strip(), proc.stderr[-2000:]
    assert not run_dir.exists()
