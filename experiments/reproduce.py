"""Every committed table and figure of the studies, from their committed per-run data.

    python experiments/reproduce.py regenerate [STUDY ...]   # rewrite tables and figures
    python experiments/reproduce.py check [STUDY ...]        # what CI runs (.ci/run)

A study is a folder experiments/<study>/ with a results/ folder; its
results/provenance.json (the manifest) says

- `runs`: the git commit(s) the runs were made at, with how that is known;
- `decides_figures`: the paths whose changes change the runs' figures (the
  emulator, the strategies, the round loop, the study's configs);
- `stale_ok`: why the runs may differ from HEAD's code (null: they may not); the
  study's README must then carry the STALE_MARK line, so a reader sees it too;
- `analyses`: the `fedbench.analyze` comparisons to rebuild, each from its folder's
  committed runs.csv (one row per run) and accuracy_per_day.csv (mean and sd over
  seeds per day): runs.csv, results.csv, accuracy_per_day.csv, results.md and the
  figures those two files determine (accuracy per day or round, time and energy
  to the target);
- `not_regenerable`: committed files (glob patterns under results/) that cannot be
  rebuilt from what is committed, each with the reason (what is missing);
- `figure_inputs`: sha256 of each analysis' two input files when its figures were
  last drawn (`regenerate` writes it), so changed data with old figures is caught.

`check` rebuilds every analysis into a temporary folder and exits 1, one line per
problem, when a committed table differs (naming the file and its first differing
line), a figure cannot be drawn or was drawn from other data, a committed file is
neither rebuilt nor declared, or the runs are stale - their commit is not an
ancestor of HEAD, or `git diff <commit> HEAD -- <decides_figures>` is not empty -
without `stale_ok`; and when `stale_ok` is set for runs that match HEAD (a re-run
must clear it). Figures are compared by being drawn without error, not by pixels:
matplotlib is not pinned, and its versions rasterise differently. Bad input (an
unknown subcommand or study, an unreadable manifest): one line, exit 2.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import fnmatch
import hashlib
import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script: the repository root, not this folder, must be importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from fedbench.analyze.figures_compare import Curve, draw_accuracy_curves, to_target  # noqa: E402
from fedbench.analyze.report import markdown  # noqa: E402
from fedbench.analyze.style import save  # noqa: E402
from fedbench.analyze.tables import (  # noqa: E402
    RunRow,
    StrategyRow,
    flat,
    mean_std,
    strategy_rows,
    write_csv,
)

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"
MANIFEST = "provenance.json"
USAGE = "python experiments/reproduce.py regenerate|check [STUDY ...]"
# A study README line that says its committed results predate HEAD's code.
STALE_MARK = "> **Stale results.**"
# The files an analysis is rebuilt from (its folder's committed per-run data).
INPUTS = ("runs.csv", "accuracy_per_day.csv")
TABLE_SUFFIXES = (".md", ".csv")
# fedbench.analyze.compare's figures, in its order; the ones committed data determine.
FIGURE_KINDS: tuple[str, ...] = (
    "accuracy_vs_time",
    "accuracy_vs_energy",
    "accuracy_vs_step",
    "to_target",
    "selection",
)


class BadInput(Exception):
    """A mistake in the command line or a manifest: one line, exit 2."""


class Unbuildable(Exception):
    """An analysis whose committed data cannot give its tables (said, exit 1)."""


@dataclass(frozen=True)
class RunSet:
    """Runs made at one commit."""

    commit: str
    results: str  # which results they gave
    how_known: str


@dataclass(frozen=True)
class Analysis:
    """One `fedbench.analyze` comparison, rebuilt from its folder's runs.csv and
    accuracy_per_day.csv with the keys it was made with."""

    folder: str  # under results/
    title: str
    target_fraction: float = 0.95
    baseline: str = "random"
    figures: bool = True
    formats: tuple[str, ...] = ("png",)


@dataclass(frozen=True)
class Manifest:
    study: str
    runs: tuple[RunSet, ...]
    decides_figures: tuple[str, ...]
    stale_ok: str | None
    analyses: tuple[Analysis, ...]
    not_regenerable: dict[str, str]
    figure_inputs: dict[str, str]
    readme: str = "README.md"


# --- the manifest -------------------------------------------------------------------------


def shown(path: Path) -> str:
    """`path` as a line names it: relative to the repository where it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def studies(names: Sequence[str]) -> list[Path]:
    """The study folders named (all: every experiments/<study>/ with a results/ folder)."""
    every = sorted(p.parent for p in EXPERIMENTS.glob("*/results") if p.is_dir())
    if not names:
        return every
    known = {p.name: p for p in every}
    for name in names:
        if name not in known:
            raise BadInput(f"unknown study {name!r}; studies: {', '.join(sorted(known))}")
    return [known[n] for n in names]


def load_manifest(study: Path) -> Manifest:
    """results/provenance.json of `study`; BadInput names the file and what is wrong."""
    path = study / "results" / MANIFEST
    where = shown(path)
    try:
        raw = json.loads(path.read_text())
        runs = tuple(RunSet(**r) for r in raw["runs"])
        analyses = tuple(
            Analysis(**{**a, "formats": tuple(a.get("formats", ("png",)))})
            for a in raw.get("analyses", [])
        )
        manifest = Manifest(
            study=raw["study"],
            runs=runs,
            decides_figures=tuple(raw["decides_figures"]),
            stale_ok=raw.get("stale_ok"),
            analyses=analyses,
            not_regenerable=dict(raw.get("not_regenerable", {})),
            figure_inputs=dict(raw.get("figure_inputs", {})),
            readme=raw.get("readme", "README.md"),
        )
    except FileNotFoundError:
        raise BadInput(f"{where}: missing (a study's results need their runs' commit)") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise BadInput(f"{where}: not a valid manifest ({type(exc).__name__}: {exc})") from None
    if manifest.study != study.name or not runs or not manifest.decides_figures:
        raise BadInput(f"{where}: needs study={study.name!r}, runs and decides_figures")
    return manifest


def save_figure_inputs(study: Path, inputs: dict[str, str]) -> None:
    """Rewrite the manifest's figure_inputs, the rest as it is."""
    path = study / "results" / MANIFEST
    raw = json.loads(path.read_text())
    raw["figure_inputs"] = dict(sorted(inputs.items()))
    path.write_text(json.dumps(raw, indent=2, ensure_ascii=False) + "\n")


# --- rebuilding an analysis ---------------------------------------------------------------


def _cell(text: str, kind: str) -> Any:
    """A CSV cell as the dataclass field's type (`kind`: its annotation)."""
    if kind == "bool":
        return text == "True"
    if kind == "int":
        return int(text)
    if kind == "float":
        return float(text)
    return text


def read_runs(path: Path) -> list[RunRow]:
    """runs.csv -> the RunRows fedbench.analyze wrote it from."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(RunRow)}
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or set(rows[0]) != set(fields):
        raise Unbuildable(f"{shown(path)}: not runs.csv of this fedbench.analyze")
    return [RunRow(**{k: _cell(row[k], fields[k]) for k in fields}) for row in rows]


def read_days(path: Path) -> list[dict[str, Any]]:
    """accuracy_per_day.csv -> tables.accuracy_per_day's rows."""
    kinds = {"day": "int", "runs": "int", "accuracy_mean": "float", "accuracy_std": "float"}
    with path.open(newline="") as f:
        return [{k: _cell(v, kinds.get(k, "str")) for k, v in r.items()} for r in csv.DictReader(f)]


def how_target(rows: list[StrategyRow], runs: list[RunRow], fraction: float) -> dict[str, str]:
    """compare()'s line on how each experiment's target was set, recovered from the runs:
    fraction x the best label's mean final accuracy, or (where that sat at or below
    day 0) day 0 plus fraction of the best gain."""
    out = {}
    for experiment in sorted({r.experiment for r in rows}):
        finals: dict[str, list[float]] = {}
        for run in runs:
            if run.experiment == experiment:
                finals.setdefault(run.strategy, []).append(run.final_accuracy)
        best = max(mean_std(values)[0] for values in finals.values())
        target = next(r.target for r in rows if r.experiment == experiment)
        plain = math.isclose(target, fraction * best, rel_tol=1e-12)
        out[experiment] = (
            f"{fraction:g} x the best mean final accuracy"
            if plain
            else f"day 0 + {fraction:g} x the best gain over it"
        )
    return out


def day_curves(days: list[dict[str, Any]], experiment: str) -> list[Curve]:
    """Per label, accuracy (%) per day or round with its sd over seeds, as
    figures_compare.accuracy_curves averages them (every run has the same evaluations)."""
    curves = []
    for label in sorted({d["strategy"] for d in days if d["experiment"] == experiment}):
        mine = sorted((d for d in days if d["experiment"] == experiment and d["strategy"] == label),
                      key=lambda d: d["day"])  # fmt: skip
        curves.append(
            Curve(
                label,
                min(d["runs"] for d in mine),
                np.array([float(d["day"]) for d in mine]),
                100.0 * np.array([d["accuracy_mean"] for d in mine]),
                100.0 * np.array([d["accuracy_std"] for d in mine]),
            )
        )
    return curves


def build(results: Path, analysis: Analysis, out: Path) -> list[Path]:
    """Rebuild one analysis of `results` into `out`; return the files written.

    The tables are what `fedbench.analyze` writes from these runs (its results.md lists
    a figure it could draw from them, or whose committed file it cannot redraw).
    """
    source = results / analysis.folder
    for name in INPUTS:
        if not (source / name).is_file():
            raise Unbuildable(f"{shown(source / name)}: not committed")
    runs = read_runs(source / "runs.csv")
    days = read_days(source / "accuracy_per_day.csv")
    if any(r.status != "completed" for r in runs):
        # results.md names an unfinished run by its folder, which runs.csv does not hold.
        raise Unbuildable(f"{shown(source)}: a run did not complete")
    per_strategy = strategy_rows(runs)
    how = how_target(per_strategy, runs, analysis.target_fraction)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "runs.csv", out / "results.csv", out / "accuracy_per_day.csv"]
    write_csv(written[0], [asdict(r) for r in runs])
    write_csv(written[1], [flat(r) for r in per_strategy])
    write_csv(written[2], days)
    listed: dict[str, list[str]] = {}
    for experiment in sorted(how) if analysis.figures else []:
        rows = [r for r in per_strategy if r.experiment == experiment]
        daily = rows[0].scenario == "daily"
        drawn = {
            "accuracy_vs_step": draw_accuracy_curves(
                day_curves(days, experiment), experiment, "step", daily, rows[0].target
            ),
            "to_target": to_target(rows),
        }
        for kind in FIGURE_KINDS:
            stem = f"{experiment}_{kind}"
            figure = drawn.get(kind)
            if figure is not None and not isinstance(figure, str):
                written += save(figure, out / stem, analysis.formats)
            elif not (source / f"{stem}.png").is_file():
                continue  # neither drawn here nor committed: results.md does not list it
            listed.setdefault(experiment, []).append(f"{stem}.png")
    text = markdown(per_strategy, days, how, listed, analysis.baseline, [], analysis.title)
    written.append(out / "results.md")
    written[-1].write_text(text)
    return written


def digest(paths: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.read_bytes())
    return h.hexdigest()


# --- staleness ----------------------------------------------------------------------------


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def changed_since(commit: str, paths: Sequence[str]) -> str | None:
    """Why runs made at `commit` may not be HEAD's figures (None: HEAD would give the same)."""
    if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        return f"commit {commit[:10]} is not in this clone"
    if _git("merge-base", "--is-ancestor", commit, "HEAD").returncode != 0:
        return f"commit {commit[:10]} is not an ancestor of HEAD"
    diff = _git("diff", "--name-only", commit, "HEAD", "--", *paths)
    files = diff.stdout.split()
    if diff.returncode != 0 or not files:
        return None if diff.returncode == 0 else f"git diff failed: {diff.stderr.strip()}"
    by_path = {p: sum(f.startswith(p.rstrip("/")) for f in files) for p in paths}
    shown = ", ".join(f"{p} ({n} files)" for p, n in by_path.items() if n)
    return f"since {commit[:10]}: {shown} differ at HEAD"


def staleness(study: Path, manifest: Manifest) -> tuple[list[str], list[str]]:
    """(problems, notes): stale runs without stale_ok, stale_ok on fresh runs, a stale_ok
    the README does not state; notes say what is stale and declared."""
    reasons = [
        why for r in manifest.runs if (why := changed_since(r.commit, manifest.decides_figures))
    ]
    name = study.name
    readme = study / manifest.readme
    marked = readme.is_file() and any(
        line.startswith(STALE_MARK) for line in readme.read_text().splitlines()
    )
    if not reasons:
        if manifest.stale_ok or marked:
            return [f"{name}: runs match HEAD: clear stale_ok and the README's stale note"], []
        return [], [f"{name}: runs match HEAD's {', '.join(manifest.decides_figures)}"]
    if not manifest.stale_ok:
        return [f"{name}: stale: {why}" for why in reasons], []
    if not marked:
        where = shown(readme)
        return [f"{name}: stale_ok set but {where} has no line starting {STALE_MARK!r}"], []
    return [], [f"{name}: stale (declared: {manifest.stale_ok}): {why}" for why in reasons]


# --- check and regenerate -----------------------------------------------------------------


def first_difference(committed: Path, built: Path) -> str | None:
    """'line N: -old / +new' of the first differing line, or None when equal."""
    old, new = committed.read_text().splitlines(), built.read_text().splitlines()
    if old == new:
        return None
    for tag, i, _, j, _ in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag != "equal":
            was = old[i] if i < len(old) else "(end of file)"
            now = new[j] if j < len(new) else "(end of file)"
            return f"line {i + 1}: committed {was[:100]!r}, from the runs {now[:100]!r}"
    return None


def check_study(study: Path, manifest: Manifest, scratch: Path) -> tuple[list[str], list[str]]:
    """(problems, notes) of one study; see the module docstring."""
    results = study / "results"
    problems, notes = staleness(study, manifest)
    built: set[Path] = set()
    for analysis in manifest.analyses:
        out = scratch / study.name / analysis.folder
        try:
            files = build(results, analysis, out)
        except Unbuildable as exc:
            problems.append(f"{study.name}: cannot rebuild {analysis.folder}: {exc}")
            continue
        except Exception as exc:  # a figure that no longer draws is the finding, not a crash
            problems.append(f"{study.name}: {analysis.folder}: {type(exc).__name__}: {exc}")
            continue
        inputs = [results / analysis.folder / n for n in INPUTS]
        key = (Path(analysis.folder) / INPUTS[0]).as_posix()
        if analysis.figures and manifest.figure_inputs.get(key) != digest(inputs):
            problems.append(
                f"{study.name}: {analysis.folder}: the figures were drawn from other data "
                "than the committed runs.csv/accuracy_per_day.csv (run regenerate)"
            )
        for file in files:
            rel = file.relative_to(out)
            committed = results / analysis.folder / rel
            where = shown(committed)
            built.add(committed)
            if file.suffix not in TABLE_SUFFIXES:
                continue  # a figure: drawn without error is the check
            if not committed.is_file():
                problems.append(f"{where}: not committed (regenerate writes it)")
            elif why := first_difference(committed, file):
                problems.append(f"{where}: differs from what its runs give, {why}")
        tables = sum(f.suffix in TABLE_SUFFIXES for f in files)
        notes.append(
            f"{study.name}: {analysis.folder}: {tables} tables compared, "
            f"{len(files) - tables} figures drawn"
        )
    problems += accounted(study, manifest, built, notes)
    return problems, notes


def accounted(study: Path, manifest: Manifest, built: set[Path], notes: list[str]) -> list[str]:
    """Every committed file under results/ is rebuilt or declared not_regenerable, and every
    declaration matches a committed file that is not rebuilt."""
    results = study / "results"
    # What git tracks (not a scratch file beside it); outside the repository, every file.
    inside = results.is_relative_to(ROOT)
    listed = _git("ls-files", "--", str(results)).stdout.split() if inside else []
    committed = {ROOT / p for p in listed} or {p for p in results.rglob("*") if p.is_file()}
    committed.discard(results / MANIFEST)
    problems = []
    used = dict.fromkeys(manifest.not_regenerable, 0)
    for path in sorted(committed - built):
        rel = path.relative_to(results).as_posix()
        pattern = next((p for p in manifest.not_regenerable if fnmatch.fnmatch(rel, p)), None)
        if pattern is None:
            problems.append(f"{shown(path)}: neither rebuilt nor in not_regenerable")
        else:
            used[pattern] += 1
    for path in built:
        rel = path.relative_to(results).as_posix()
        if any(fnmatch.fnmatch(rel, p) for p in manifest.not_regenerable):
            problems.append(f"{shown(path)}: rebuilt, yet declared not_regenerable")
    for pattern, count in used.items():
        if count == 0:
            problems.append(f"{study.name}: not_regenerable {pattern!r} matches no committed file")
        else:
            why = manifest.not_regenerable[pattern]
            notes.append(
                f"{study.name}: not regenerable (declared), {count} files {pattern}: {why}"
            )
    return problems


def check(paths: list[Path]) -> int:
    manifests = [(p, load_manifest(p)) for p in paths]
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fedbench-reproduce-") as scratch:
        for study, manifest in manifests:
            found, notes = check_study(study, manifest, Path(scratch))
            problems += found
            for line in notes:
                print(f"ok   {line}")
    for line in problems:
        print(f"FAIL {line}")
    verdict = f"{len(problems)} problems" if problems else "every table is what its runs give"
    print(f"check: {len(manifests)} studies: {verdict}")
    return 1 if problems else 0


def regenerate(paths: list[Path]) -> int:
    manifests = [(p, load_manifest(p)) for p in paths]
    failed = 0
    for study, manifest in manifests:
        inputs = dict(manifest.figure_inputs)
        for analysis in manifest.analyses:
            results = study / "results"
            try:
                files = build(results, analysis, results / analysis.folder)
            except Unbuildable as exc:
                print(f"{study.name}: cannot rebuild {analysis.folder}: {exc}")
                failed += 1
                continue
            key = (Path(analysis.folder) / INPUTS[0]).as_posix()
            if analysis.figures:
                inputs[key] = digest([results / analysis.folder / n for n in INPUTS])
            where = shown(results / analysis.folder)
            print(f"{study.name}: {len(files)} files -> {where}")
        if inputs != manifest.figure_inputs:
            save_figure_inputs(study, inputs)
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if not args or args[0] not in ("regenerate", "check"):
            given = f"{args[0]!r}: " if args else ""
            raise BadInput(f"{given}expected regenerate or check; usage: {USAGE}")
        paths = studies(args[1:])
        return check(paths) if args[0] == "check" else regenerate(paths)
    except BadInput as exc:
        print(f"reproduce.py: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
