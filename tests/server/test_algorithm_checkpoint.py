"""Every `algorithm=` survives a checkpoint: its state round-trips through checkpoint.pt.

Each Flower strategy of fedbench/conf/algorithm aggregates two rounds of a model with
BatchNorm (whose `num_batches_tracked` is an int64 scalar: FedAdam's moments
of it are numpy float64 scalars, which `torch.load(weights_only=True)`
refused), is checkpointed as the server does (export_data -> save -> load ->
import_data into a freshly built strategy) and aggregates a third round next
to the original. Both must give the same model, bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.serverapp.strategy import Strategy
from torch import nn

from fedbench.algorithms.submodels import SubmodelStrategy
from fedbench.experiment.build import build_algorithm
from fedbench.experiment.compose import compose_experiment
from fedbench.models import model_config
from fedbench.models.width import build_at
from fedbench.paths import conf_dir
from fedbench.server import checkpoint
from fedbench.server.offer import Offer
from tests.helpers import task_identity
from tests.server.fakes import FakeGrid

ALGORITHMS = sorted(p.stem for p in (conf_dir() / "algorithm").glob("*.yaml"))
NODES = (1, 2, 3, 4, 5)


def _model(strategy: Strategy | None = None) -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(8, 3))
    net(torch.randn(4, 1, 4, 4))  # BatchNorm's statistics and num_batches_tracked move
    if isinstance(strategy, SubmodelStrategy):  # submodels of a zoo model with a width rule
        net = build_at(model_config("small_cnn"), 1.0)
        net(torch.randn(4, 3, 32, 32))
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _round(strategy: Strategy, server_round: int, arrays: ArrayRecord) -> ArrayRecord:
    """One round: the strategy's messages, a seeded reply from every node, its aggregate."""
    task_identity()
    sent = list(strategy.configure_train(server_round, arrays, ConfigRecord(), FakeGrid({}, NODES)))
    rng = np.random.default_rng(server_round)
    replies = []
    for i, msg in enumerate(sent):
        update = {}
        for key, array in arrays.items():
            value = array.numpy()
            step = rng.normal(size=value.shape) * 0.1
            update[key] = (value + step.astype(value.dtype)) if value.dtype.kind == "f" else value
        content = RecordDict(
            {
                "arrays": ArrayRecord(
                    {k: torch.from_numpy(np.asarray(v)) for k, v in update.items()}
                ),
                "metrics": MetricRecord({"num-examples": 10 + i, "train_loss": 1.0 / (i + 1)}),
            }
        )
        replies.append(Message(content, reply_to=msg))
    aggregated, _ = strategy.aggregate_train(server_round, replies)
    assert aggregated is not None
    return aggregated


def _build(name: str) -> Strategy:
    experiment = compose_experiment(
        ["experiment=smoke", "fleet=mixed8", "strategy.clients_per_round=5", f"algorithm={name}"]
    )
    strategy = build_algorithm(experiment)
    if isinstance(strategy, SubmodelStrategy):  # every device at rate 1 (the replies' shapes)
        strategy.bind(model_config("small_cnn"), np.ones(len(NODES)), Offer.device_of)
    return strategy


def _arrays(record: ArrayRecord) -> dict[str, np.ndarray]:
    return {k: v.numpy() for k, v in record.items()}


@pytest.mark.parametrize("name", ALGORITHMS)
def test_an_algorithms_state_survives_the_checkpoint(name: str, tmp_path: Path) -> None:
    strategy = _build(name)
    arrays = ArrayRecord(_model(strategy))
    for server_round in (1, 2):
        arrays = _round(strategy, server_round, arrays)

    saved = checkpoint.Checkpoint(
        round=2,
        now_s=0.0,
        model_version=2,
        arrays=arrays.to_torch_state_dict(),
        selector={},
        algorithm=checkpoint.export_data(strategy),
        ledger={},
        writer={},
        rng=checkpoint.rng_state(),
    )
    checkpoint.save(tmp_path, saved)
    loaded = checkpoint.load(tmp_path)  # torch.load(weights_only=True)
    assert loaded is not None
    resumed = _build(name)
    checkpoint.import_data(resumed, loaded.algorithm)

    straight = _arrays(_round(strategy, 3, arrays))
    after_resume = _arrays(_round(resumed, 3, ArrayRecord(loaded.arrays)))
    assert straight.keys() == after_resume.keys()
    for key, value in straight.items():
        np.testing.assert_array_equal(after_resume[key], value, err_msg=f"{name}: {key}")


def test_the_state_of_fedadam_holds_numpy_scalars() -> None:
    """The case that broke resume: if Flower ever stores arrays instead, this test says so."""
    strategy = _build("fedadam")
    arrays = ArrayRecord(_model())
    _round(strategy, 1, arrays)
    moments = checkpoint.export_data(strategy)["m_t"]
    assert isinstance(moments["1.num_batches_tracked"], np.generic)
