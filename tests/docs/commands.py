"""Every shell command the README and the docs give, with where it is written.

A command is a line of a fenced code block labelled bash, sh, shell or console
(or unlabelled, where the line starts like a command: `python`, `fedbench`,
`flwr`, `bash`, `pip`, `ray`), with its backslash continuations joined, a
`$ ` prompt and a trailing `# comment` removed, and `a && b` split into its
parts. `python -m tests.docs.commands` lists them with file and line.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGS = frozenset({"bash", "sh", "shell", "console"})
COMMAND_STARTS = frozenset({"python", "python3", "fedbench", "flwr", "bash", "pip", "ray"})
_FENCE = re.compile(r"^(\s*)```+\s*([\w+-]*)")
_ASSIGN = re.compile(r"^([A-Za-z_]\w*)=(\S+)$")
_VAR = re.compile(r"\$\{(\w+)\}|\$(\w+)")


@dataclass(frozen=True)
class DocCommand:
    path: Path
    line: int  # 1-based, the line the command starts on
    text: str  # as written, continuations joined, prompt and comment removed

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def argv(self) -> list[str]:
        return shlex.split(self.text)


def doc_files() -> list[Path]:
    """README.md, docs/*.md and every experiment's README.md."""
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "experiments").glob("*/README.md")),
    ]


def _strip_comment(line: str) -> str:
    """The line without a trailing `# ...` (shlex's rule: a # that starts a word)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=False)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        words = list(lexer)
    except ValueError:  # an unbalanced quote: leave the line to fail loudly later
        return line.strip()
    if not words:
        return ""
    # Cut the original text at the comment so quoting stays as written.
    cut = len(line)
    for match in re.finditer(r"(^|\s)#", line):
        prefix = line[: match.start() + len(match.group(1))]
        try:
            if shlex.split(prefix) == words:
                cut = match.start()
                break
        except ValueError:
            continue
    return line[:cut].strip()


def commands_in(path: Path) -> list[DocCommand]:
    lines = path.read_text().splitlines()
    found: list[DocCommand] = []
    lang: str | None = None
    pending: tuple[int, str] | None = None
    variables: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        fence = _FENCE.match(raw)
        if fence:
            lang = None if lang is not None else fence.group(2).lower()
            pending = None
            continue
        if lang is None or (lang and lang not in SHELL_LANGS):
            continue
        text = raw.strip()
        if pending is not None:
            start, head = pending
            text = f"{head} {text}"
        else:
            start = number
            if text.startswith("$ "):
                text = text[2:]
            if not text or text.startswith("#"):
                continue
            if lang == "" and text.split()[0] not in COMMAND_STARTS:
                continue  # an unlabelled block's output or config, not a command
        if text.endswith("\\"):
            pending = (start, text[:-1].rstrip())
            continue
        pending = None
        text = _strip_comment(text)
        assignment = _ASSIGN.match(text)
        if assignment:  # `D=folder` on its own line: later commands of the page use $D
            variables[assignment.group(1)] = assignment.group(2)
            continue
        text = _VAR.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)
        for part in text.split(" && "):
            if part.strip():
                found.append(DocCommand(path, start, part.strip()))
    return found


def all_commands() -> list[DocCommand]:
    return [c for path in doc_files() for c in commands_in(path)]


if __name__ == "__main__":
    for command in all_commands():
        print(f"{command.where}: {command.text}")
