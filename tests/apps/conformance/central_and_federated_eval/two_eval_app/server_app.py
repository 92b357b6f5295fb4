"""The app's ServerApp (Message API): FedAvg, centralized `evaluate_fn` plus federated evaluation.

It writes the strategy's `Result` (per-round metrics and a digest of the final
model) to results.json, which is how a runner reads what the app produced.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import cast

from flwr.app import ArrayRecord, Context, Message, MetricRecord
from flwr.app.user_config import UserConfig
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg, Result

from two_eval_app.task import make_net, server_testset, test

app = ServerApp()


def by_partition(replies: Iterable[Message]) -> list[Message]:
    """Replies sorted by the partition-id each client reports (error replies first)."""

    def key(msg: Message) -> int:
        return (
            int(cast(int, msg.content.config_records["node"]["partition-id"]))
            if msg.has_content()
            else -1
        )

    return sorted(replies, key=key)


class OrderedFedAvg(FedAvg):
    """FedAvg that aggregates replies in partition order, not arrival order.

    Float sums depend on their order, and a runtime's reply order is arbitrary
    (Flower samples nodes at random and runs them on parallel actors): a fixed
    order makes the aggregate, and so every later round, repeat to the last digit.
    """

    def aggregate_train(
        self, server_round: int, replies: Iterable[Message]
    ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        return super().aggregate_train(server_round, by_partition(replies))

    def aggregate_evaluate(
        self, server_round: int, replies: Iterable[Message]
    ) -> MetricRecord | None:
        return super().aggregate_evaluate(server_round, by_partition(replies))


def central_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    """Loss and accuracy of the global model on the server's held-out digits."""
    net = make_net(0)
    net.load_state_dict(arrays.to_torch_state_dict())
    loss, accuracy = test(net, *server_testset())
    return MetricRecord({"central_loss": loss, "central_acc": accuracy})


def write_results(result: Result, run_config: UserConfig) -> Path:
    """results.json in `results-dir` (default: the working directory)."""

    def by_round(records: dict[int, MetricRecord]) -> dict[str, dict[str, object]]:
        return {str(r): dict(m) for r, m in sorted(records.items())}

    digest = hashlib.sha256()
    for name, array in result.arrays.items():
        digest.update(name.encode() + array.numpy().tobytes())
    doc = {
        "train": by_round(result.train_metrics_clientapp),
        "evaluate": by_round(result.evaluate_metrics_clientapp),
        "central": by_round(result.evaluate_metrics_serverapp),
        "extra": {"final-arrays-sha256": digest.hexdigest()},
    }
    path = Path(str(run_config.get("results-dir") or ".")) / "results.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


@app.main()
def main(grid: Grid, context: Context) -> None:
    run = context.run_config
    net = make_net(int(run["seed"]))
    strategy = OrderedFedAvg(fraction_train=1.0, fraction_evaluate=1.0)
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(net.state_dict()),
        num_rounds=int(run["num-server-rounds"]),
        evaluate_fn=central_evaluate,
    )
    write_results(result, run)
