"""Every model the characterisation issue names is benchmarked by `python -m fedbench.bench`.

tests/models checks that each builds and trains one step; this checks the
bench answers for each (its workload measurement runs one real step on the
host, then the emulator costs it). Measuring VGG16 or Xception takes tens
of seconds on a small host, hence `slow`.
"""

from __future__ import annotations

import json

import pytest

from fedbench.bench import run
from fedbench.models import model_names

ISSUE_MODELS = (
    "resnet50_cifar", "squeezenet", "vgg16", "xception", "inceptionv1", "alexnet",
    "char_cnn_lstm", "dcgan", "dqn", "mentee", "reduced_mobilenet", "reduced_resnet",
    "fc_only", "conv_only", "dwconv_only", "densenet40",
)  # fmt: skip


def test_the_issue_models_are_in_the_zoo() -> None:
    assert set(ISSUE_MODELS) <= set(model_names())


@pytest.mark.slow
@pytest.mark.parametrize("model", ISSUE_MODELS)
def test_bench_costs_every_issue_model(model: str) -> None:
    out = json.loads(run(["device=jetson_tx2", f"model={model}", "batch_size=1"]))
    assert out["status"] == "ok", out["reason"]
    assert out["latency_s"] > 0 and out["energy_j"] > 0 and out["peak_mem_mb"] > 0
    assert out["gflop_per_step"] > 0
