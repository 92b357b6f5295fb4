"""experiments/reproduce.py: the committed tables are what their committed runs give, and
`check` fails when a table is edited by hand, a figure's data changes, a committed file is
neither rebuilt nor declared, or runs are stale without saying so (issue 47, item 4)."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from experiments import reproduce

ASYNC = reproduce.EXPERIMENTS / "async_study"


@pytest.fixture(scope="module")
def committed() -> tuple[list[str], list[str]]:
    """check_study of the committed async study (the smallest with an analysis)."""
    scratch = Path(__import__("tempfile").mkdtemp(prefix="reproduce-test-"))
    try:
        return reproduce.check_study(ASYNC, reproduce.load_manifest(ASYNC), scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _copy(tmp_path: Path) -> tuple[Path, reproduce.Manifest]:
    """The async study's README and results, copied where they can be edited."""
    study = tmp_path / "async_study"
    shutil.copytree(ASYNC / "results", study / "results")
    shutil.copy(ASYNC / "README.md", study / "README.md")
    return study, reproduce.load_manifest(ASYNC)


def test_the_committed_tables_are_what_their_runs_give(committed: tuple[list, list]) -> None:
    problems, notes = committed
    assert problems == [], problems
    assert any("4 tables compared, 4 figures drawn" in n for n in notes), notes
    # Stale, and said so: the commit and what changed since are named.
    assert any(n.startswith("async_study: stale (declared: ") and "f851ea9282" in n for n in notes)


def test_a_table_edited_by_hand_is_named_with_its_first_differing_line(tmp_path: Path) -> None:
    study, manifest = _copy(tmp_path)
    table = study / "results" / "results.md"
    lines = table.read_text().splitlines(keepends=True)
    number = next(i for i, line in enumerate(lines) if line.startswith("| random [fedbuff]"))
    lines[number] = lines[number].replace("23.3 ± 6.6", "21.3 ± 6.6")
    table.write_text("".join(lines))
    problems, _ = reproduce.check_study(study, manifest, tmp_path / "scratch")
    assert problems == [
        f"{table}: differs from what its runs give, line {number + 1}: committed "
        f"{lines[number].rstrip()[:100]!r}, from the runs "
        f"{lines[number].rstrip().replace('21.3 ± 6.6', '23.3 ± 6.6')[:100]!r}"
    ]


def test_changed_run_data_fails_its_tables_and_its_figures(tmp_path: Path) -> None:
    study, manifest = _copy(tmp_path)
    runs = study / "results" / "runs.csv"
    runs.write_text(runs.read_text().replace("278.53518904234085", "178.53518904234085", 1))
    problems, _ = reproduce.check_study(study, manifest, tmp_path / "scratch")
    assert any("results.csv: differs" in p for p in problems), problems
    assert any("figures were drawn from other data" in p for p in problems), problems


def test_a_file_neither_rebuilt_nor_declared_fails_and_so_does_an_unused_declaration(
    tmp_path: Path,
) -> None:
    study, manifest = _copy(tmp_path)
    (study / "results" / "notes.md").write_text("by hand\n")
    declared = {**manifest.not_regenerable, "gone_*.png": "was removed"}
    problems, _ = reproduce.check_study(
        study, replace(manifest, not_regenerable=declared), tmp_path / "scratch"
    )
    assert any(p.endswith("notes.md: neither rebuilt nor in not_regenerable") for p in problems)
    assert "async_study: not_regenerable 'gone_*.png' matches no committed file" in problems


def test_stale_runs_fail_unless_declared_and_a_declaration_on_fresh_runs_fails(
    tmp_path: Path,
) -> None:
    study, manifest = _copy(tmp_path)
    problems, _ = reproduce.staleness(study, replace(manifest, stale_ok=None))
    assert len(problems) == 1 and problems[0].startswith("async_study: stale: since f851ea9282: ")
    assert "fedbench/devices/ (" in problems[0]
    head = subprocess.run(
        ["git", "-C", str(reproduce.ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    fresh = replace(manifest, runs=(reproduce.RunSet(head, "all", "test"),))
    problems, _ = reproduce.staleness(study, fresh)
    assert problems == ["async_study: runs match HEAD: clear stale_ok and the README's stale note"]
    # Declared in the manifest but not in the README: a reader would not know.
    readme = study / "README.md"
    readme.write_text(readme.read_text().replace(reproduce.STALE_MARK, "> Note."))
    problems, _ = reproduce.staleness(study, manifest)
    assert problems == [f"async_study: stale_ok set but {readme} has no line starting "
                        f"{reproduce.STALE_MARK!r}"]  # fmt: skip


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ([], "expected regenerate or check"),
        (["verify"], "'verify': expected regenerate or check"),
        (["check", "no_such_study"], "unknown study 'no_such_study'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert reproduce.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


def test_a_manifest_that_is_not_json_is_one_line(tmp_path: Path, monkeypatch) -> None:
    study = tmp_path / "experiments" / "broken"
    (study / "results").mkdir(parents=True)
    (study / "results" / reproduce.MANIFEST).write_text("{not json")
    monkeypatch.setattr(reproduce, "ROOT", tmp_path)
    with pytest.raises(reproduce.BadInput, match=r"provenance.json: not a valid manifest"):
        reproduce.load_manifest(study)


def test_every_study_with_results_has_a_manifest_naming_its_runs_commits() -> None:
    for study in reproduce.studies([]):
        manifest = reproduce.load_manifest(study)
        assert all(len(r.commit) == 40 and r.how_known for r in manifest.runs), study
        raw = json.loads((study / "results" / reproduce.MANIFEST).read_text())
        assert raw["study"] == study.name


def test_every_committed_study_is_fresh_or_says_it_is_stale() -> None:
    # The same staleness rule CI's `reproduce.py check` applies, here so that a change to
    # the paths that decide a study's figures fails `python -m pytest` on the developer's
    # machine, not only CI after the stop (stop 52 failed CI this way).
    shallow = reproduce._git("rev-parse", "--is-shallow-repository").stdout.strip()
    if shallow == "true":
        pytest.skip("a shallow clone lacks the runs' commits")
    problems = [
        p
        for study in reproduce.studies([])
        for p in reproduce.staleness(study, reproduce.load_manifest(study))[0]
    ]
    assert problems == []
