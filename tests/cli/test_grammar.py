"""The key=value grammar every entry point shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.cli.grammar import Grammar, Key, parse_ints, parse_words, script
from fedbench.errors import FedbenchError

G = Grammar(
    prog="python -m fedbench.tool",
    summary="A tool.",
    keys=(
        Key("device", "the device", required=True),
        Key("steps", "how many", "1"),
        Key("knobs.freq_ghz", "a dotted key"),
        Key("target.NAME", "one per experiment"),
        Key("background", "a flag", "false", flag=True),
    ),
    examples=("python -m fedbench.tool device=rpi4",),
    positional="PATH",
    aliases={"hydra.run.dir": "steps"},
)


def test_key_value_dotted_patterns_aliases_and_positionals(tmp_path: Path) -> None:
    args = G.parse(
        [
            "device=rpi4",
            "knobs.freq_ghz=1.2",
            "target.study_daily=0.9",
            "hydra.run.dir=3",
            str(tmp_path),
        ]
    )
    assert args.values == {
        "device": "rpi4",
        "knobs.freq_ghz": "1.2",
        "target.study_daily": "0.9",
        "steps": "3",
    }
    assert args.positional == (str(tmp_path),)
    assert args.with_prefix("target") == {"study_daily": "0.9"}
    with pytest.raises(FedbenchError, match="unknown key 'target'"):
        G.parse(["device=rpi4", "target=0.9"])  # the pattern needs its NAME


def test_a_folder_named_like_an_override_is_a_path(tmp_path: Path) -> None:
    odd = tmp_path / "strategy=oort,seed=1"
    odd.mkdir()
    args = G.parse(["device=x", str(odd)])
    assert args.positional == (str(odd),)


def test_a_typo_names_the_closest_key() -> None:
    with pytest.raises(FedbenchError, match=r"unknown key 'step' \(did you mean 'steps'\?\)"):
        G.parse(["device=x", "step=2"])
    with pytest.raises(FedbenchError, match="missing device=...: the device"):
        G.parse(["steps=2"])


def test_help_lists_every_key_default_and_an_example() -> None:
    args = G.parse(["--help", "stepz=oops"])  # help wins over mistakes
    assert args.help
    text = G.help()
    for line in (
        "device               *",
        "steps                1",
        "knobs.freq_ghz       -",
        "hydra.run.dir",
        "examples:",
        "python -m fedbench.tool device=rpi4",
        "PATH...",
    ):
        assert line in text


def test_the_older_flag_spelling_still_reads(tmp_path: Path) -> None:
    args = G.parse(["--device", "rpi4", "--steps=4", "--background", str(tmp_path)])
    assert args.values == {"device": "rpi4", "steps": "4", "background": "true"}
    assert args.positional == (str(tmp_path),)


def test_main_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert G.main(lambda argv: "result", ["device=x"]) == 0
    assert capsys.readouterr().out == "result\n"
    assert G.main(lambda argv: 3, ["device=x"]) == 3
    assert G.main(lambda argv: None, ["-h"]) == 0
    assert "usage: python -m fedbench.tool" in capsys.readouterr().out

    def fails(argv: object) -> None:
        raise FedbenchError("steps=0: expected a positive integer")

    assert G.main(fails, ["device=x"]) == 2
    assert capsys.readouterr().err == (
        "fedbench.tool: error: steps=0: expected a positive integer\n"
    )


BENCH = Grammar(
    prog="python benchmarks/tool.py",
    summary="A benchmark.",
    keys=(Key("sizes", "fleet sizes", "1000,10000"), Key("models", "models", "lenet")),
    examples=("python benchmarks/tool.py sizes=10",),
)


def test_a_benchmark_script_reads_key_value_with_defaults_and_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    got: list[dict[str, str]] = []
    assert script(BENCH, got.append, ["sizes=10,20"]) == 0
    assert got == [{"sizes": "10,20", "models": "lenet"}]
    assert parse_ints("sizes", got[0]["sizes"], 1) == [10, 20]
    for argv in (["help"], ["--help"]):
        assert script(BENCH, got.append, argv) == 0
        out = capsys.readouterr().out
        assert "usage: python benchmarks/tool.py key=value" in out and "1000,10000" in out
    assert len(got) == 1  # help runs nothing
    assert script(BENCH, got.append, ["size=10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("benchmarks/tool.py: error: unknown key 'size'") and "\n" not in err
    assert "(did you mean 'sizes'?); valid: models, sizes" in err

    def bad(o: dict[str, str]) -> None:
        parse_words("models", o["models"], ["lenet", "dqn"])

    assert script(BENCH, bad, ["models=lenet,vgg"]) == 2
    assert "models='lenet,vgg': unknown 'vgg'; valid: dqn, lenet" in capsys.readouterr().err
    with pytest.raises(FedbenchError, match="expected an integer >= 1"):
        parse_ints("sizes", "10,x", 1)
