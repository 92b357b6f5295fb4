"""One command grammar for fedbench's tools: Hydra-style `key=value` overrides.

`python -m fedbench` is a Hydra app; the other entry points (bench,
characterize, analyze, device, profile_device, and the scripts under
benchmarks/, through `script`) are not - they take no config
groups and write no `.hydra/` folder - but they read their arguments the same
way: `key=value` with dotted keys where a key has parts
(`target.study_daily=0.9`), `--help`/`-h` listing every key with its default
and an example, and an unknown key refused with the closest valid one.

For scripts written against the older flag spelling, `--some-key value`,
`--some-key=value` and a bare `--flag` (for a boolean key) are read as
`some_key=value` / `flag=true`; the help shows only `key=value`.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fedbench.errors import FedbenchError, choices, closest

HELP_FLAGS = frozenset({"--help", "-h"})


@dataclass(frozen=True)
class Key:
    """One `key=value` argument.

    `name` may end in `.NAME` (a pattern): then any `prefix.<word>` is this
    key (e.g. `target.NAME` accepts `target.study_daily`). `default=None`
    with `required=False` means "unset" (the help shows `-`).
    """

    name: str
    help: str
    default: str | None = None
    required: bool = False
    flag: bool = False  # a boolean: a legacy bare `--name` means name=true

    @property
    def prefix(self) -> str | None:
        head, dot, tail = self.name.rpartition(".")
        return head if dot and tail.isupper() else None

    def matches(self, key: str) -> bool:
        prefix = self.prefix
        if prefix is None:
            return key == self.name
        return key.startswith(prefix + ".") and len(key) > len(prefix) + 1


@dataclass(frozen=True)
class Args:
    """What was given: the key=value pairs in order, and the positional items."""

    values: dict[str, str] = field(default_factory=dict)
    positional: tuple[str, ...] = ()
    help: bool = False

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __getitem__(self, key: str) -> str:
        return self.values[key]

    def with_prefix(self, prefix: str) -> dict[str, str]:
        """`prefix.<name>=v` items as {name: v}."""
        start = prefix + "."
        return {k[len(start) :]: v for k, v in self.values.items() if k.startswith(start)}


@dataclass(frozen=True)
class Grammar:
    """The arguments of one entry point.

    `open_keys`: other keys are passed through for the tool to check (a
    study's parameters); `positional`: the name of positional items (e.g.
    "PATH"), None if the tool takes none; `aliases`: other spellings of a key
    (`hydra.run.dir` for `out`), so the main command's habits carry over.
    """

    prog: str
    summary: str
    keys: tuple[Key, ...]
    examples: tuple[str, ...]
    positional: str | None = None
    positional_help: str = ""
    open_keys: str = ""  # what the other keys are, for the help; "" = none accepted
    aliases: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    extra_help: Callable[[Args], str] | None = None

    @property
    def name(self) -> str:
        """`python -m fedbench.bench` -> `fedbench.bench`, `python benchmarks/caps.py` ->
        `benchmarks/caps.py` (the prefix of error lines)."""
        return self.prog.removeprefix("python -m ").removeprefix("python ")

    def key(self, name: str) -> Key | None:
        return next((k for k in self.keys if k.matches(name)), None)

    def parse(self, argv: Sequence[str]) -> Args:
        """Read argv; with --help anywhere, return Args(help=True) without checking the rest."""
        items = _normalise(list(argv), self)
        if any(item in HELP_FLAGS for item in items):
            values, positional = self._split([i for i in items if i not in HELP_FLAGS], False)
            return Args(values, positional, help=True)
        values, positional = self._split(items, True)
        for key in self.keys:
            if key.required and key.name not in values:
                raise FedbenchError(
                    f"missing {key.name}=...: {key.help}; e.g. {self.examples[0]} "
                    f"(all keys: {self.prog} --help)"
                )
        return Args(values, positional)

    def options(self, argv: Sequence[str]) -> dict[str, str]:
        """Every key's value: what `argv` gives, else the key's default ("" for none)."""
        given = self.parse(argv).values
        return {k.name: k.default or "" for k in self.keys} | given

    def _split(self, items: list[str], strict: bool) -> tuple[dict[str, str], tuple[str, ...]]:
        values: dict[str, str] = {}
        positional: list[str] = []
        for item in items:
            key, eq, value = item.partition("=")
            if eq and key:
                key = self.aliases.get(key, key)
                if strict and key in values:
                    raise FedbenchError(
                        f"{key}= given twice ({values[key]!r}, {value!r}); for several values "
                        f"give one comma list, e.g. {key}={values[key]},{value}"
                    )
                if self.key(key) is not None or self.open_keys:
                    values[key] = value
                    continue
                if self.positional and Path(item).exists():  # a folder named like `a=b`
                    positional.append(item)
                    continue
                if strict:
                    raise FedbenchError(self._unknown(key))
            elif self.positional and item:
                positional.append(item)
            elif strict:
                raise FedbenchError(
                    f"argument {item!r}: expected key=value, e.g. {self.examples[0]} "
                    f"(all keys: {self.prog} --help)"
                )
        return values, tuple(positional)

    def _unknown(self, key: str) -> str:
        names = [k.name for k in self.keys] + list(self.aliases)
        return (
            f"unknown key {key!r}{closest(key, names)}; valid: {choices(names)} "
            f"(see {self.prog} --help)"
        )

    def help(self, args: Args | None = None) -> str:
        usage = f"usage: {self.prog} " + (f"{self.positional}... " if self.positional else "")
        usage += "key=value ..."
        out = [usage, "", textwrap.fill(self.summary, 100)]
        if self.description:
            out += ["", self.description.strip()]
        if self.positional:
            out += ["", "positional:", _row(f"{self.positional}...", "", self.positional_help)]
        out += ["", "keys (default; * = required):"]
        for key in self.keys:
            shown = "*" if key.required else (key.default if key.default is not None else "-")
            out.append(_row(key.name, shown, key.help))
        for alias, target in self.aliases.items():
            out.append(_row(alias, "", f"the same as {target}="))
        if self.open_keys:
            out += ["", textwrap.fill(self.open_keys, 100)]
        if self.extra_help is not None:
            out += ["", self.extra_help(args or Args()).rstrip()]
        out += ["", "examples:", *(f"  {e}" for e in self.examples)]
        return "\n".join(out) + "\n"

    def main(self, body: Callable[[Sequence[str]], object], argv: Sequence[str] | None) -> int:
        """Run `body(argv)` as a command: help -> exit 0, a user mistake -> one line, exit 2.

        A string `body` returns is printed (the tool's result on stdout); an
        integer is the exit code.
        """
        items = list(sys.argv[1:] if argv is None else argv)
        try:
            args = self.parse(items)
            if args.help:
                print(self.help(args), end="")
                return 0
            out = body(items)
        except FedbenchError as exc:
            print(f"{self.name}: error: {exc}", file=sys.stderr)
            return 2
        if isinstance(out, int) and not isinstance(out, bool):
            return out
        if isinstance(out, str) and out:
            print(out)
        return 0


def script(
    grammar: Grammar, body: Callable[[dict[str, str]], object], argv: Sequence[str] | None = None
) -> int:
    """A script's command line (the benchmarks): `body` gets every key's value (`options`).

    `help`, `--help` or `-h` prints the keys with their defaults; a user
    mistake - an unknown key (named, with the valid ones), a bad value - is
    one line and exit code 2 (Grammar.main).
    """
    items = [
        "--help" if item == "help" else item for item in (sys.argv[1:] if argv is None else argv)
    ]
    return grammar.main(lambda given: body(grammar.options(given)), items)


def _row(name: str, default: str, text: str) -> str:
    head = f"  {name:<20} {default:<14}"
    if len(head) > 37:  # a long key or default: the text on the next line
        return (
            head.rstrip()
            + "\n"
            + textwrap.fill(text, 100, initial_indent=" " * 38, subsequent_indent=" " * 38)
        )
    return textwrap.fill(text, 100, initial_indent=head + " ", subsequent_indent=" " * 38)


def _normalise(items: list[str], grammar: Grammar) -> list[str]:
    """The legacy `--key value` / `--key=value` / `--flag` spellings as key=value."""
    out: list[str] = []
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if item in HELP_FLAGS or not item.startswith("--") or len(item) == 2:
            out.append(item)
            continue
        name, eq, value = item[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            out.append(f"{key}={value}")
            continue
        spec = grammar.key(key)
        if spec is not None and spec.flag:
            out.append(f"{key}=true")
        elif i < len(items) and not items[i].startswith("--"):
            out.append(f"{key}={items[i]}")
            i += 1
        else:
            out.append(f"{key}=")  # refused below as an unknown or empty key
    return out


def parse_bool(key: str, raw: str) -> bool:
    lowered = raw.lower()
    if lowered in ("true", "yes", "1", "on"):
        return True
    if lowered in ("false", "no", "0", "off"):
        return False
    raise FedbenchError(f"{key}={raw!r}: expected true or false")


def parse_int(key: str, raw: str, minimum: int = 0) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise FedbenchError(f"{key}={raw!r}: expected an integer >= {minimum}")
    return value


def parse_ints(key: str, raw: str, minimum: int = 0) -> list[int]:
    """A comma list of integers (`sizes=1000,10000`), each at least `minimum`."""
    items = [item for item in raw.split(",") if item.strip()]
    if not items:
        raise FedbenchError(f"{key}={raw!r}: expected a comma list of integers >= {minimum}")
    return [parse_int(key, item.strip(), minimum) for item in items]


def parse_words(key: str, raw: str, valid: Sequence[str] | None = None) -> list[str]:
    """A comma list of names (`models=lenet,dqn`), each one of `valid` where given."""
    words = [w.strip() for w in raw.split(",") if w.strip()]
    if not words:
        raise FedbenchError(f"{key}={raw!r}: expected a comma list of names")
    for word in words:
        if valid is not None and word not in valid:
            raise FedbenchError(
                f"{key}={raw!r}: unknown {word!r}{closest(word, valid)}; valid: {choices(valid)}"
            )
    return words


def parse_float(key: str, raw: str, low: float | None = None, high: float | None = None) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise FedbenchError(f"{key}={raw!r}: expected a number") from None
    if (low is not None and value < low) or (high is not None and value > high):
        raise FedbenchError(f"{key}={raw!r}: expected a number in [{low}, {high}]")
    return value
