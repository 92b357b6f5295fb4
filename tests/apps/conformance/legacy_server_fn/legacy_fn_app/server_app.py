"""The app's ServerApp, legacy style: `server_fn` returns `ServerAppComponents`.

Flower's compatibility layer runs the legacy loop; the app cannot see its
History, so its FedAvg subclass records what it aggregates and rewrites
results.json after every step (the last write holds the whole run).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.common import (
    EvaluateRes,
    FitRes,
    Metrics,
    NDArrays,
    Parameters,
    Scalar,
    ndarrays_to_parameters,
)
from flwr.server import ServerApp, ServerAppComponents, ServerConfig
from flwr.server.client_proxy import ClientProxy
from flwr.server.strategy import FedAvg

from legacy_fn_app.task import get_weights, make_net, server_testset, set_weights, test

FitResults = list[tuple[ClientProxy, FitRes]]
EvaluateResults = list[tuple[ClientProxy, EvaluateRes]]


def weighted_mean(results: list[tuple[int, Metrics]]) -> Metrics:
    """Example-weighted mean of each metric but partition-id (which only orders replies)."""
    total = sum(n for n, _ in results)
    keys = [k for k in results[0][1] if k != "partition-id"] if results else []
    return {k: sum(n * float(m[k]) for n, m in results) / total for k in keys}


class OrderedFedAvg(FedAvg):
    """Legacy FedAvg that aggregates in partition order and records every metric.

    Float sums depend on their order and the runtime's reply order is arbitrary;
    sorting by the partition-id clients report makes runs repeat to the last digit.
    """

    def __init__(self, results_path: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.results_path = results_path
        self.doc: dict[str, Any] = {"train": {}, "evaluate": {}, "central": {}, "extra": {}}

    def aggregate_fit(
        self, server_round: int, results: FitResults, failures: list[Any]
    ) -> tuple[Parameters | None, dict[str, Scalar]]:
        ordered = sorted(results, key=lambda r: int(r[1].metrics["partition-id"]))
        parameters, metrics = super().aggregate_fit(server_round, ordered, failures)
        if parameters is not None:
            digest = hashlib.sha256(b"".join(parameters.tensors)).hexdigest()
            self.doc["extra"]["final-arrays-sha256"] = digest
        return parameters, self._record("train", server_round, metrics)

    def aggregate_evaluate(
        self, server_round: int, results: EvaluateResults, failures: list[Any]
    ) -> tuple[float | None, dict[str, Scalar]]:
        ordered = sorted(results, key=lambda r: int(r[1].metrics["partition-id"]))
        loss, metrics = super().aggregate_evaluate(server_round, ordered, failures)
        self._record("evaluate", server_round, {"eval_loss": loss, **metrics})
        return loss, metrics

    def evaluate(
        self, server_round: int, parameters: Parameters
    ) -> tuple[float, dict[str, Scalar]] | None:
        evaluated = super().evaluate(server_round, parameters)
        if evaluated is not None:
            self._record("central", server_round, {"central_loss": evaluated[0], **evaluated[1]})
        return evaluated

    def _record(self, section: str, server_round: int, metrics: dict[str, Any]) -> dict[str, Any]:
        self.doc[section][str(server_round)] = dict(metrics)
        self.results_path.write_text(json.dumps(self.doc, indent=1))
        return metrics


def central_evaluate(
    server_round: int, weights: NDArrays, config: dict[str, Scalar]
) -> tuple[float, dict[str, Scalar]]:
    """Legacy `evaluate_fn`: the global model on the server's held-out digits."""
    net = make_net(0)
    set_weights(net, weights)
    loss, accuracy = test(net, *server_testset())
    return loss, {"central_acc": accuracy}


def server_fn(context: Context) -> ServerAppComponents:
    run = context.run_config
    lr = float(run["lr"])
    strategy = OrderedFedAvg(
        results_path=Path(str(run.get("results-dir") or ".")) / "results.json",
        fraction_fit=1.0,
        fraction_evaluate=1.0,
        initial_parameters=ndarrays_to_parameters(get_weights(make_net(int(run["seed"])))),
        on_fit_config_fn=lambda server_round: {"server-round": server_round, "lr": lr},
        evaluate_fn=central_evaluate,
        fit_metrics_aggregation_fn=weighted_mean,
        evaluate_metrics_aggregation_fn=weighted_mean,
    )
    return ServerAppComponents(
        strategy=strategy, config=ServerConfig(num_rounds=int(run["num-server-rounds"]))
    )


app = ServerApp(server_fn=server_fn)
