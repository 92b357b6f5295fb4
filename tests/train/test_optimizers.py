"""The local optimizer is one `_partial_` target: checked, built, measured from one registry."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.errors import FedbenchError
from fedbench.experiment.build import workload_optimizer
from fedbench.measure.workload import measure_workload
from fedbench.train import hyper
from tests.bad_inputs import _typed


@pytest.mark.parametrize(
    ("overrides", "cls", "workload"),
    [
        ([], torch.optim.SGD, "sgd_momentum"),  # what the golden rows were measured with
        (["train.momentum=0"], torch.optim.SGD, "sgd"),
        (["train.optimizer=adam"], torch.optim.Adam, "adam"),
        (["train.optimizer=adamw"], torch.optim.AdamW, "adamw"),
        (
            ["train.optimizer._target_=torch.optim.RMSprop", "+train.optimizer.alpha=0.9"],
            torch.optim.RMSprop,
            "torch.optim.RMSprop",
        ),
    ],
)
def test_the_optimizer_is_built_with_the_hyperparameters_it_takes(
    overrides: list[str], cls: type[torch.optim.Optimizer], workload: str
) -> None:
    experiment = _typed(["train.lr=0.2", *overrides])
    params = experiment.train.params()
    optimizer = params.optimizer.build(
        nn.Linear(2, 2).parameters(), lr=params.lr, momentum=0.5, weight_decay=0.01
    )
    assert type(optimizer) is cls
    group = optimizer.param_groups[0]
    assert group["lr"] == 0.2 and group["weight_decay"] == 0.01
    assert group.get("momentum", 0.5) == 0.5  # where the class takes one (Adam does not)
    assert workload_optimizer(experiment.train) == workload
    if cls is torch.optim.RMSprop:
        assert group["alpha"] == 0.9  # the class's own setting, from the partial


def test_an_optimizer_without_a_named_step_is_measured_as_itself() -> None:
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 5))
    w = measure_workload(model, (10,), 8, model_name="t", optimizer="torch.optim.RMSprop")
    sgd = measure_workload(model, (10,), 8, model_name="t", optimizer="sgd", cache=False)
    assert w.optimizer.flops > sgd.optimizer.flops  # RMSprop keeps and updates a square average


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("train.optimizer=sgdm", "train.optimizer='sgdm': valid: adam, adamw, sgd"),
        ("+train.optimizer.lr=0.1", "train.optimizer.lr: set train.lr instead"),
        ("+train.optimizer.nesterof=true", "did you mean 'nesterov'"),
        ("train.optimizer._partial_=false", "train.optimizer._partial_ must be true"),
        ("train.optimizer._target_=torch.nn.Linear", "not a torch.optim.Optimizer"),
    ],
)
def test_a_bad_optimizer_is_one_line_naming_the_key(override: str, message: str) -> None:
    with pytest.raises(FedbenchError, match=message.replace("(", r"\(")):
        _typed([override])


def test_the_hyperparameters_round_trip_through_the_train_config() -> None:
    params = _typed(["train.lr=0.3", "train.local_epochs=2"]).train.params()
    sent = hyper.to_config(params)
    assert sent == {
        "lr": 0.3,
        "local-epochs": 2,
        "batch-size": 16,
        "momentum": 0.9,
        "weight-decay": 5e-4,
    }
    assert hyper.from_config(sent, _typed([]).train.params()) == params
