"""The app's ServerApp: legacy context, `DefaultWorkflow` with a SecAgg+ fit workflow, and
`DifferentialPrivacyClientSideFixedClipping` around FedAvg (the fl-dp-sa pattern).

SecAgg+ hands the strategy only the sum of the clipped updates; the inner
FedAvg records that aggregate update's norm, which cannot exceed the clipping
norm if `fixedclipping_mod` ran on every client. NumPy's global RNG is seeded
because the DP wrapper draws its Gaussian noise from it. results.json is built
from the legacy context's History once the workflow returns.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context
from flwr.common import FitIns, FitRes, Metrics, Parameters, Scalar, ndarrays_to_parameters
from flwr.common import parameters_to_ndarrays as to_arrays
from flwr.server import Grid, LegacyContext, ServerApp, ServerConfig
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.history import History
from flwr.server.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg
from flwr.server.workflow import DefaultWorkflow, SecAggPlusWorkflow

from secagg_dp_app.task import get_weights, make_net, server_testset, set_weights, test, update_norm

app = ServerApp()


def weighted_mean(results: list[tuple[int, Metrics]]) -> Metrics:
    """Example-weighted mean of each metric but partition-id (which only orders replies)."""
    total = sum(n for n, _ in results)
    keys = [k for k in results[0][1] if k != "partition-id"] if results else []
    return {k: sum(n * float(m[k]) for n, m in results) / total for k in keys}


class ClipCheckFedAvg(FedAvg):
    """FedAvg in partition order that records the norm of each round's aggregate update."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: Parameters | None = None
        self.aggregate_update_norm: dict[str, float] = {}

    def configure_fit(
        self, server_round: int, parameters: Parameters, client_manager: ClientManager
    ) -> list[tuple[ClientProxy, FitIns]]:
        self.sent = parameters
        return super().configure_fit(server_round, parameters, client_manager)

    def aggregate_fit(
        self, server_round: int, results: list[tuple[ClientProxy, FitRes]], failures: list[Any]
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        ordered = sorted(results, key=lambda r: int(r[1].metrics["partition-id"]))
        parameters, metrics = super().aggregate_fit(server_round, ordered, failures)
        if parameters is not None and self.sent is not None:
            norm = update_norm(to_arrays(self.sent), to_arrays(parameters))
            self.aggregate_update_norm[str(server_round)] = norm
        return parameters, metrics


def central_evaluate(
    server_round: int, weights: list[np.ndarray], config: dict[str, Scalar]
) -> tuple[float, dict[str, Scalar]]:
    net = make_net(0)
    set_weights(net, weights)
    loss, accuracy = test(net, *server_testset())
    return loss, {"central_acc": accuracy}


def history_doc(history: History, inner: ClipCheckFedAvg, clipping_norm: float) -> dict[str, Any]:
    """The History as results.json's {section: {round: metrics}} plus the clipping evidence."""
    doc: dict[str, Any] = {"train": {}, "evaluate": {}, "central": {}}
    parts: list[tuple[str, str, dict[str, list[tuple[int, Any]]]]] = [
        ("train", "", history.metrics_distributed_fit),
        ("evaluate", "", history.metrics_distributed),
        ("evaluate", "eval_loss", {"": history.losses_distributed}),
        ("central", "", history.metrics_centralized),
        ("central", "central_loss", {"": history.losses_centralized}),
    ]
    for section, rename, metrics in parts:
        for name, values in metrics.items():
            for server_round, value in values:
                doc[section].setdefault(str(server_round), {})[rename or name] = value
    doc["extra"] = {
        "clipping-norm": clipping_norm,
        "aggregate-update-norm": inner.aggregate_update_norm,
    }
    return doc


@app.main()
def main(grid: Grid, context: Context) -> None:
    run = context.run_config
    lr = float(run["lr"])
    np.random.seed(int(run["seed"]))
    inner = ClipCheckFedAvg(
        fraction_fit=1.0,
        fraction_evaluate=1.0,
        initial_parameters=ndarrays_to_parameters(get_weights(make_net(int(run["seed"])))),
        on_fit_config_fn=lambda server_round: {"server-round": server_round, "lr": lr},
        evaluate_fn=central_evaluate,
        fit_metrics_aggregation_fn=weighted_mean,
        evaluate_metrics_aggregation_fn=weighted_mean,
    )
    strategy = DifferentialPrivacyClientSideFixedClipping(
        inner,
        noise_multiplier=float(run["noise-multiplier"]),
        clipping_norm=float(run["clipping-norm"]),
        num_sampled_clients=int(run["num-sampled-clients"]),
    )
    legacy = LegacyContext(
        context, config=ServerConfig(num_rounds=int(run["num-server-rounds"])), strategy=strategy
    )
    fit_workflow = SecAggPlusWorkflow(
        num_shares=int(run["num-shares"]),
        reconstruction_threshold=int(run["reconstruction-threshold"]),
    )
    DefaultWorkflow(fit_workflow=fit_workflow)(grid, legacy)
    doc = history_doc(legacy.history, inner, float(run["clipping-norm"]))
    path = Path(str(run.get("results-dir") or ".")) / "results.json"
    path.write_text(json.dumps(doc, indent=1))
