"""Study YAMLs build; command-line values convert to the defaults' types; bad input is named."""

from __future__ import annotations

import pytest

from fedbench.characterize.cli import host_options, parse_args, pick_studies, study_overrides
from fedbench.characterize.device import HostOptions
from fedbench.characterize.registry import build_study, study_names
from fedbench.characterize.studies.base import Study
from fedbench.characterize.studies.batch_sweep import BatchSweep
from fedbench.characterize.studies.daily_accuracy import DailyAccuracy
from fedbench.errors import FedbenchError

STUDIES = (
    "background",
    "batch_sweep",
    "cpu_config",
    "daily_accuracy",
    "op_breakdown",
    "width_depth",
)


def test_every_study_yaml_builds_its_study() -> None:
    assert tuple(study_names()) == STUDIES
    for name in STUDIES:
        study = build_study(name, {})
        assert isinstance(study, Study) and study.name == name
        assert study.columns and study.paper


def test_overrides_take_the_type_of_the_default() -> None:
    sweep = build_study(
        "batch_sweep", {"models": "small_cnn,dqn", "batches": "1,4", "exact_max_batch": "4"}
    )
    assert isinstance(sweep, BatchSweep)
    assert sweep.models == ("small_cnn", "dqn") and sweep.batches == (1, 4)
    assert sweep.exact_max_batch == 4
    daily = build_study("daily_accuracy", {"quick": "false", "days": "2"})
    assert isinstance(daily, DailyAccuracy) and daily.quick is False and daily.days == 2


@pytest.mark.parametrize(
    ("name", "overrides", "message"),
    [
        ("batch_sweep", {"batches": "1,x"}, "batches='1,x': expected a comma list of int"),
        ("batch_sweep", {"batches": "0,4"}, "expected positive integers"),
        ("batch_sweep", {"models": "densenet4"}, "did you mean 'densenet40'"),
        ("batch_sweep", {"modles": "dqn"}, "did you mean 'models'"),
        ("daily_accuracy", {"quick": "maybe"}, "expected true or false"),
        ("cpu_config", {"batch_size": "four"}, "expected int"),
        ("width_depth", {"families": "fc_onl"}, "did you mean 'fc_only'"),
    ],
)
def test_bad_values_are_named(name: str, overrides: dict[str, str], message: str) -> None:
    with pytest.raises(FedbenchError, match=message):
        build_study(name, overrides)


def test_cli_arguments() -> None:
    assert "daily_accuracy" not in pick_studies("all")  # trains for real: only when named
    assert pick_studies("batch_sweep,background") == ["batch_sweep", "background"]
    with pytest.raises(FedbenchError, match="did you mean 'batch_sweep'"):
        pick_studies("batch_swep")
    with pytest.raises(FedbenchError, match="missing device="):
        parse_args(["study=batch_sweep"])
    with pytest.raises(FedbenchError, match="expected key=value"):
        parse_args(["study", "device=this"])
    # A key goes to the studies that have it; a key none has is an error.
    split = study_overrides(["batch_sweep", "cpu_config"], {"models": "dqn", "model": "dqn"})
    assert split == {"batch_sweep": {"models": "dqn"}, "cpu_config": {"model": "dqn"}}
    with pytest.raises(FedbenchError, match="not a parameter of cpu_config"):
        study_overrides(["cpu_config"], {"batches": "1"})
    assert host_options({"warmup": "1", "steps": "2"}, "this") == HostOptions(1, 2, None)
    with pytest.raises(FedbenchError, match="only for device=this"):
        host_options({"steps": "2"}, "rpi4")
