"""The READMEs' prose is whole: no line cut mid-sentence and glued to what follows, no line
or paragraph repeated (issue 47: two such breaks in experiments/heterogeneous_models/README.md,
a line cut inside a code span and run into the next heading, and a sentence's tail pasted
again under its paragraph). Fenced code and tables are left alone: their lines repeat."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.docs.commands import ROOT, doc_files

# A prose line this long, seen again this close, is a paste, not a refrain.
MIN_REPEATED = 40
NEAR = 20
_FENCE = re.compile(r"^\s*(```|~~~)")


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code, tables and HTML comments."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced and not line.lstrip().startswith(("|", "<!--")):
            out.append((number, line))
    return out


def paragraphs(lines: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Runs of non-blank prose lines (a heading is a paragraph of its own)."""
    out: list[list[tuple[int, str]]] = [[]]
    for number, line in lines:
        if not line.strip() or line.startswith("#"):
            out.append([])
        if line.strip():
            out[-1].append((number, line))
        if line.startswith("#"):
            out.append([])
    return [p for p in out if p]


def problems(text: str) -> list[str]:
    """'line N: what is broken' for each break found."""
    lines = prose(text)
    found = []
    for i, (number, line) in enumerate(lines):
        words = line.strip()
        if len(words) < MIN_REPEATED:
            continue
        for earlier, before in lines[max(0, i - NEAR) : i]:
            if before.strip() == words:
                found.append(f"line {number}: repeats line {earlier}: {words[:60]!r}")
                break
    paras = paragraphs(lines)
    for para in paras:
        joined = " ".join(line.strip() for _, line in para)
        # Backticks outside ``double`` spans pair up within a paragraph; an odd count is
        # a code span a cut line left open (and what followed it glued into the span).
        if joined.replace("``", "").count("`") % 2:
            found.append(f"line {para[0][0]}: a code span opened and never closed")
        if re.search(r"\S\s*#{2,6} [A-Z]", joined) and not joined.startswith("#"):
            found.append(f"line {para[0][0]}: a heading inside a line: {joined[:60]!r}")
    for before, after in zip(paras, paras[1:], strict=False):
        if [line for _, line in before] == [line for _, line in after] and len(before) > 1:
            found.append(f"line {after[0][0]}: repeats the paragraph at line {before[0][0]}")
    # A paragraph that starts mid-word with the tail of a nearby line: a cut line's rest.
    starts = {para[0][0]: para[0][1].strip() for para in paras}
    for number, first in starts.items():
        if len(first) < 20 or not first[0].islower():
            continue
        nearby = [line for n, line in lines if number - 3 * NEAR <= n < number]
        if any(line.rstrip().endswith(first) and line.strip() != first for line in nearby):
            found.append(f"line {number}: starts with the tail of an earlier line: {first!r}")
    return sorted(set(found), key=lambda p: int(p.split(":")[0].split()[1]))


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_prose_is_whole(path: Path) -> None:
    found = problems(path.read_text())
    assert not found, f"{path.relative_to(ROOT)}:\n" + "\n".join(found)


def test_the_two_breaks_of_issue_47_are_found() -> None:
    """The check finds what was broken in heterogeneous_models/README.md before the fix."""
    old = subprocess.run(
        ["git", "-C", str(ROOT), "show", "a7977e7:experiments/heterogeneous_models/README.md"],
        capture_output=True,
        text=True,
    )
    if old.returncode != 0:
        pytest.skip("the commit before the fix is not in this clone")
    found = problems(old.stdout)
    assert any("a code span opened and never closed" in p for p in found), found
    assert any("starts with the tail of an earlier line" in p for p in found), found
    assert any("repeats line" in p for p in found), found


def test_clean_prose_with_code_and_tables_passes() -> None:
    text = (
        "# Title\n\nA paragraph with `code` and ``a `tick` inside``.\n\n"
        "| a | b |\n|---|---|\n| same row repeated here in the table body |\n"
        "| same row repeated here in the table body |\n\n"
        "```bash\npython -m fedbench experiment=smoke seed=0 a long line\n"
        "python -m fedbench experiment=smoke seed=0 a long line\n```\n"
    )
    assert problems(text) == []
