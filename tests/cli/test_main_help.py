"""`python -m fedbench --help` is generated from fedbench/conf/: every group the main config
composes, with its options, and a line saying what the group decides."""

from __future__ import annotations

from fedbench.cli import help as main_help
from fedbench.paths import conf_dir


def test_every_group_of_the_main_config_has_a_line_of_help() -> None:
    groups = main_help.groups()
    assert {"data", "model", "fleet", "strategy", "scenario", "train", "runtime"} <= set(groups)
    missing = set(groups) - set(main_help.GROUP_HELP)
    assert not missing, f"add a line for {sorted(missing)} to GROUP_HELP in fedbench/cli/help.py"


def test_the_help_lists_each_groups_options_and_marks_the_default() -> None:
    text = main_help.text()
    for group, default in main_help.groups().items():
        assert f"  {group} " in text
        for option in main_help.options(group):
            assert option in text
        if default is not None:
            assert f"{default}*" in text
    # Groups the main command does not compose are not offered.
    assert "characterize" not in text.split("Other commands")[0]
    assert (conf_dir() / "characterize").is_dir()


def test_a_literal_dollar_survives_hydras_template() -> None:
    assert "$" not in main_help.text().replace("$$", "")
