"""FedProx's proximal term reaches local training and changes it (Li et al., MLSys'20)."""

from __future__ import annotations

import copy

import torch
from torch import nn

from fedbench.algorithms.fedprox import Proximal
from fedbench.core.plans import Plan
from fedbench.data.source import Tensors
from fedbench.train.loop import TrainParams, train_local


def _train(mu: float, plan: Plan | None = None) -> tuple[nn.Module, nn.Module]:
    torch.manual_seed(0)
    start = nn.Sequential(nn.Flatten(), nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
    data = Tensors(torch.randn(64, 2, 2, 2), torch.randint(0, 3, (64,)))
    model = copy.deepcopy(start)
    params = TrainParams(16, 3, 0.2, 0.9, 0.0, halves=(Proximal(mu),))
    train_local(model, data, params, seed=1, plan=plan)
    return start, model


def _distance(a: nn.Module, b: nn.Module) -> float:
    return sum(
        float((p - q).pow(2).sum()) for p, q in zip(a.parameters(), b.parameters(), strict=True)
    )


def test_the_proximal_term_keeps_local_weights_closer_to_the_global_model() -> None:
    start, plain = _train(0.0)
    _, prox = _train(1.0)
    assert _distance(start, prox) < 0.7 * _distance(start, plain)
    assert not all(
        torch.equal(p, q) for p, q in zip(plain.parameters(), prox.parameters(), strict=True)
    )


def test_the_proximal_gradient_is_the_same_with_micro_batches() -> None:
    _, full = _train(1.0)
    _, micro = _train(1.0, Plan(microbatches=2))
    for p, q in zip(full.parameters(), micro.parameters(), strict=True):
        assert torch.allclose(p, q, atol=1e-5)


def test_the_train_config_sets_local_training_the_flower_way() -> None:
    """proximal-mu turns on FedProx's half; lr, local-epochs, ... override the experiment's."""
    import pytest
    from flwr.app import ConfigRecord

    from fedbench.client.handler import train_params
    from fedbench.errors import FedbenchError
    from tests.bad_inputs import _typed

    experiment = _typed(["algorithm=fedprox", "train.lr=0.01"])
    sent = ConfigRecord({"proximal-mu": 0.25, "lr": 0.5, "local-epochs": 3, "server-round": 1})
    params = train_params(experiment, sent)
    assert [type(h) for h in params.halves] == [Proximal]
    assert params.corrections()[0].mu == 0.25  # type: ignore[attr-defined]
    assert (params.lr, params.local_epochs) == (0.5, 3)
    assert params.batch_size == experiment.train.batch_size  # not sent: the experiment's
    assert train_params(experiment, ConfigRecord()).halves == ()
    with pytest.raises(FedbenchError, match="malformed server message: proximal-mu=-1"):
        train_params(experiment, ConfigRecord({"proximal-mu": -1.0}))
    with pytest.raises(FedbenchError, match="malformed server message: lr=0.0"):
        train_params(experiment, ConfigRecord({"lr": 0.0}))
