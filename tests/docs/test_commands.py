"""Every command the README and the docs give still runs as written, checked cheaply.

tests.docs.commands collects them (file and line). Each is checked by what it is:

- `python -m fedbench ...` / `fedbench [run] ...`: run with `dry_run=true`, which builds
  and checks the typed experiment (every group, key, `_target_`, file it names) and exits
  0 without a run folder: exit 0 is required.
- another entry point (`python -m fedbench.analyze`, `fedbench.bench`, `fedbench.fleet
  describe`, `fedbench.security issue-tls`, ...): its `--help` (the subcommand's, where the
  command names one) must exit 0 and list every key the command gives.
- a script (`python benchmarks/x.py ...`): it exists, compiles, and spells every key the
  command gives; `bash x.sh`: it exists and `bash -n` accepts it.
- a few commands are run whole (RUN_WHOLE); commands that install, start clusters or need
  other machines are skipped with the reason in SKIP.

Every process command runs through tests.cli_runner (one interpreter start, a fork per
command) in a scratch folder that mirrors the repository's top level, so relative paths
resolve as in a checkout and nothing is left in it. A failure names the file and line.
The quick start is also run as a user would, in a subprocess of its own.
"""

from __future__ import annotations

import atexit
import os
import py_compile
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from tests.cli_runner import Command, Result, run_commands
from tests.docs.commands import ROOT, DocCommand, all_commands, commands_in, doc_files

ENV = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FEDBENCH_PROGRESS": "plain"}
# Placeholders a reader replaces: what the check puts in their place.
PLACEHOLDERS = {
    "path/to/my-flower-app": "tests/apps/quickstart",
    "HEAD_IP": "127.0.0.1",
}

# (first words, why it is not run here)
SKIP: tuple[tuple[str, str], ...] = (
    ("pip install", "installs packages: needs the network (.ci/run installs the same way)"),
    ("python -m pytest", "the test suite itself (.ci/run runs it)"),
    ("ruff", "the linter (.ci/run runs it)"),
    ("mypy", "the type checker (.ci/run runs it)"),
    ("ray start", "starts a Ray cluster node: needs the cluster's machines"),
    ("flwr", "Flower's CLI against a running SuperLink"),
)
# Commands given in full (substring): why they are not checked the cheap way.
SKIP_TEXT: tuple[tuple[str, str], ...] = (
    (
        "fleet=my_lab",
        "needs fedbench/conf/fleet/my_lab.yaml and certs/, which the page's earlier steps make",
    ),
    ("fleet.population.trace.", "reads the user's own measured trace files (traces/ is theirs)"),
    ("runtime.ray_address=", "connects to an existing Ray cluster (ray start, above it)"),
    ("data=cifar10", "downloads CIFAR-10 (170 MB); tests/data/test_cifar10.py reads fakes"),
    ("data=femnist", "reads FEMNIST's files (a download); tests/data/test_femnist.py runs it"),
    ("data=speech_commands", "reads Speech Commands' files; tests/data/test_speech_commands.py"),
    ("data=hf", "reads a Hugging Face set (hub or local files); tests/data/test_hf_source.py"),
)
# Commands (exact text) that are run whole, not only checked: cheap and side-effect free.
RUN_WHOLE = frozenset(
    {
        "python -m fedbench.security issue-tls out=certs hosts=192.168.1.10,server.lan",
    }
)
# Sweeps dry-run as Hydra runs them (every job); the others job by job (_sweep_jobs).
WHOLE_SWEEPS = frozenset(
    {"python -m fedbench -m experiment=daily_densenet strategy=random scenario.days=3,5"}
)
# What every dry run imports: the runner's parent imports it once, before it forks.
PRELOAD = (
    "sklearn.datasets",
    "fedbench.data.digits",
    "fedbench.models",
    "strategies",
    "fedbench.experiment.schema",
    "fedbench.runtime.simulation",
    "fedbench.server.hooks",
    "fedbench.analyze.cli",
    "fedbench.bench",
)


@dataclass(frozen=True)
class Check:
    doc: DocCommand
    how: str  # dry_run | help | whole | script | bash | skip
    commands: tuple[Command, ...] = ()
    keys: tuple[str, ...] = ()
    reason: str = ""


# `FLWR_X=1 flwr run .`: a command's environment assignments, checked as the command alone.
_ENV_PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")


def _argv(doc: DocCommand) -> list[str]:
    text = _ENV_PREFIX.sub("", doc.text)
    for placeholder, value in PLACEHOLDERS.items():
        text = text.replace(placeholder, value)
    # `[key=value]` in a usage line is an optional argument: checked without it.
    return [w for w in DocCommand(doc.path, doc.line, text).argv if not re.fullmatch(r"\[.*\]", w)]


def _keys(args: list[str]) -> tuple[str, ...]:
    """The key of every key=value argument, without a leading + or ~ and its dotted tail."""
    return tuple(a.split("=", 1)[0].lstrip("+~").split(".")[0] for a in args if "=" in a)


def plan(doc: DocCommand, cwd: Path) -> Check:
    """How `doc` is checked (see the module docstring)."""
    bare = _ENV_PREFIX.sub("", doc.text)
    for head, reason in SKIP:
        if bare == head or bare.startswith(head + " "):
            return Check(doc, "skip", reason=reason)
    for fragment, reason in SKIP_TEXT:
        if fragment in doc.text:
            return Check(doc, "skip", reason=reason)
    argv = _argv(doc)
    if argv[0] == "bash":
        return Check(doc, "bash", keys=(argv[1],))
    if argv[0] == "fedbench":
        module, args = "fedbench.cli.main", argv[1:]
    elif argv[0] in ("python", "python3") and argv[1] == "-m":
        module, args = argv[2], argv[3:]
    elif argv[0] in ("python", "python3") and argv[1] == "-c":
        raise AssertionError(f"{doc.where}: python -c is not checked: give a module or a script")
    elif argv[0] in ("python", "python3") and argv[1].endswith(".py"):
        return Check(doc, "script", keys=(argv[1], *_keys(argv[2:])))
    else:
        raise AssertionError(f"{doc.where}: no way to check {doc.text!r}: add it to SKIP")
    run = module == "fedbench" or (
        module == "fedbench.cli.main" and (not args or args[0] == "run" or "=" in args[0])
    )
    if doc.text in RUN_WHOLE:
        return Check(doc, "whole", (Command(module, tuple(args), str(cwd)),))
    if run:
        jobs = _sweep_jobs(args) if doc.text not in WHOLE_SWEEPS else [args]
        return Check(doc, "dry_run", tuple(_dry_run(job, cwd, module) for job in jobs))
    sub = [args[0]] if args and re.fullmatch(r"[a-z][a-z-]*", args[0]) else []
    if module == "fedbench.cli.main" and sub and args[1:2] and "=" not in args[1]:
        sub.append(args[1])  # fedbench fleet describe
    rest = args[len(sub) :]
    if module in ("fedbench.fleet", "fedbench.cli.main") and "describe" in sub:
        # Its arguments are an experiment's overrides: the experiment's dry run checks them.
        runs = (Command(module, (*sub, "--help"), str(cwd)), _dry_run(rest, cwd))
        return Check(doc, "help", runs)
    return Check(doc, "help", (Command(module, (*sub, "--help"), str(cwd)),), keys=_keys(rest))


def _dry_run(args: list[str], cwd: Path, module: str = "fedbench") -> Command:
    return Command(module, (*args, "dry_run=true"), str(cwd))


def _sweep_jobs(args: list[str]) -> list[list[str]]:
    """A sweep (`-m`) as single runs in which every value of every list is one job's: n
    runs for lists of at most n values, where the sweep has their product. Seeds are
    checked once (any integer in range passes) and the sweep's folder not at all."""
    if "-m" not in args and "--multirun" not in args:
        return [args]
    args = [
        re.sub(r"^seed=([^,]*),.*", r"seed=\1", a)
        for a in args
        if a not in ("-m", "--multirun") and not a.startswith("hydra.sweep.dir=")
    ]
    swept = [
        (i, a.split("=", 1)[0], a.split("=", 1)[1].split(","))
        for i, a in enumerate(args)
        if "=" in a and "," in a and not re.search(r"[\[\]{}()]", a)
    ]
    n = max((len(values) for _, _, values in swept), default=1)
    jobs = []
    for j in range(n):
        job = list(args)
        for i, key, values in swept:
            job[i] = f"{key}={values[j % len(values)]}"
        jobs.append(job)
    return jobs


def _scratch() -> Path:
    """A folder whose top level links to the repository's: relative paths resolve."""
    cwd = Path(tempfile.mkdtemp(prefix="fedbench-docs-"))
    # rmtree unlinks the links, never what they point to.
    atexit.register(shutil.rmtree, cwd, ignore_errors=True)
    for entry in ROOT.iterdir():
        if entry.name not in ("outputs", "multirun", ".git"):
            (cwd / entry.name).symlink_to(entry)
    return cwd


@cache
def _outcomes(studies: bool) -> dict[str, tuple[Check, list[tuple[Command, Result]]]]:
    """Every command of the README and docs/ (studies=False) or of experiments/ checked."""
    cwd = _scratch()
    checks = [plan(doc, cwd) for doc in all_commands() if _is_study(doc) == studies]
    unique = list(dict.fromkeys(command for check in checks for command in check.commands))
    done = dict(zip(unique, run_commands(unique, preload=PRELOAD), strict=True))
    return {
        f"{c.doc.where} {c.doc.text}": (c, [(command, done[command]) for command in c.commands])
        for c in checks
    }


def _is_study(doc: DocCommand) -> bool:
    return doc.path.is_relative_to(ROOT / "experiments")


def _params() -> list[object]:
    """One per command; a study's (experiments/: some thirty sweeps' jobs) is marked slow."""
    return [
        pytest.param(f"{c.where} {c.text}", marks=[pytest.mark.slow] if _is_study(c) else [])
        for c in all_commands()
    ]


def failure(check: Check, results: list[tuple[Command, Result]]) -> str | None:
    """Why a checked command can no longer run as written (file:line first), or None."""
    where = f"{check.doc.where}: `{check.doc.text}`"
    if check.how in ("bash", "script"):
        script = ROOT / check.keys[0]
        if not script.is_file():
            return f"{where}: no script {check.keys[0]}"
        if check.how == "bash":
            proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
            return f"{where}: bash -n: {proc.stderr}" if proc.returncode else None
        try:
            py_compile.compile(str(script), doraise=True)
        except py_compile.PyCompileError as exc:
            return f"{where}: {exc.msg}"
        missing = [k for k in check.keys[1:] if k not in script.read_text()]
        return f"{where}: {check.keys[0]} takes no key {', '.join(missing)}" if missing else None
    for command, result in results:
        if result.code != 0:
            tail = (result.stderr.strip() or result.stdout.strip())[-1500:]
            return f"{where} exits {result.code} as `{command.shown}`: {tail}"
    if check.how == "help":
        shown = results[0][1].stdout
        missing = [k for k in check.keys if not re.search(rf"\b{re.escape(k)}\b", shown)]
        return f"{where}: --help lists no key {', '.join(missing)}" if missing else None
    return None


@pytest.mark.parametrize("key", _params())
def test_every_documented_command_still_runs(key: str) -> None:
    check, results = _outcomes(key.startswith("experiments/"))[key]
    if check.how == "skip":
        pytest.skip(f"{check.doc.where}: `{check.doc.text}`: {check.reason}")
    assert check.how in ("bash", "script") or results, check
    problem = failure(check, results)
    assert problem is None, problem


def test_a_command_that_no_longer_runs_fails_naming_its_file_and_line(tmp_path: Path) -> None:
    """The check can fail: a misspelled option, an unknown key of another entry point, a
    script that is gone."""
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```bash\npython -m fedbench experiment=smoke strategy=oortt\n"
        "python -m fedbench.analyze runs/ targte=0.9\npython benchmarks/gone.py\n```\n"
    )
    docs = [DocCommand(ROOT / "README.md", c.line, c.text) for c in commands_in(page)]
    checks = [plan(doc, tmp_path) for doc in docs]
    assert [c.how for c in checks] == ["dry_run", "help", "script"]
    unique = [command for check in checks for command in check.commands]
    results = iter(run_commands(unique, preload=PRELOAD))
    problems = [failure(c, [(m, next(results)) for m in c.commands]) for c in checks]
    assert problems[0] is not None and problems[0].startswith("README.md:4: "), problems[0]
    assert " exits " in problems[0] and "oortt" in problems[0], problems[0]
    assert problems[1] == (
        "README.md:5: `python -m fedbench.analyze runs/ targte=0.9`: --help lists no key targte"
    )
    assert problems[2] is not None and problems[2].endswith("no script benchmarks/gone.py")


def test_the_docs_hold_commands_of_every_kind() -> None:
    """The collector finds what the README gives: a broken parser cannot pass silently."""
    hows = {plan(doc, ROOT).how for doc in all_commands()}
    assert {"dry_run", "help", "script", "bash", "skip", "whole"} <= hows, hows
    readme = [c.text for c in commands_in(ROOT / "README.md")]
    assert "python -m fedbench experiment=daily_densenet" in readme
    assert len(readme) >= 10, readme


# --- the quick start, as a user runs it -----------------------------------------------------


def _quick_start() -> list[DocCommand]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^## Quick start\n(.*?)^## ", text, re.S | re.M)
    assert block, "README.md has no '## Quick start' section"
    start = text[: block.start()].count("\n") + 1
    return [c for c in commands_in(ROOT / "README.md") if c.line > start][:4]


def test_the_quick_start_is_install_and_run_then_the_ci_test_command() -> None:
    """Two lines: install + the main job on the embedded data, then what .ci/run tests with
    (the fast tier; .ci/run then runs the slow tier)."""
    commands = _quick_start()
    assert [c.text for c in commands] == [
        "pip install torch==2.13.0",
        'pip install -e ".[dev]"',
        "python -m fedbench experiment=daily_densenet",
        "python -m pytest",
    ], [c.text for c in commands]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    tiers = [commands[-1].text, f"{commands[-1].text} -m slow"]
    assert ci[-2:] == tiers, f".ci/run ends with {ci[-2:]!r}, README says {tiers[0]!r}"


def test_the_quick_start_run_passes_its_checks_in_a_process_of_its_own(
    tmp_path: Path,
) -> None:
    run = _quick_start()[2]
    proc = subprocess.run(
        [sys.executable, *run.argv[1:], "dry_run=true"],
        capture_output=True,
        text=True,
        timeout=300,
        env=ENV,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, f"{run.where}: {proc.stderr[-2000:]}"
    assert "config ok: daily_densenet would write" in proc.stdout, proc.stdout
    assert list(tmp_path.iterdir()) == [], "a dry run left a folder behind"


# --- links ----------------------------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    return {
        _slug(line.lstrip("#"))
        for line in path.read_text().splitlines()
        if re.match(r"#{1,6} ", line)
    }


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_and_headings_that_exist(path: Path) -> None:
    broken = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        for target in _LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked offline
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}:{number}: {target}: no such file")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
                broken.append(f"{path.relative_to(ROOT)}:{number}: {target}: no such heading")
    assert not broken, "\n".join(broken)
