"""The app's ServerApp (Message API): a FedAvg subclass that runs its own `start()` loop.

`ScheduledFedAvg.start` halves the learning rate it sends every round (a
schedule in the train config, which plain `FedAvg.start` cannot vary), evaluates
centrally each round, and writes results.json itself when the loop ends, into
the run's output folder (`results-dir`, default the working directory).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, cast

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg, Result

from custom_start_app.task import make_net, server_testset, test

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


class ScheduledFedAvg(OrderedFedAvg):
    """FedAvg whose own `start()` sends `lr * lr-decay**(round-1)` to the clients each round."""

    def __init__(self, lr: float, lr_decay: float, results_dir: str) -> None:
        super().__init__(fraction_train=1.0, fraction_evaluate=0.0)
        self.lr, self.lr_decay, self.results_dir = lr, lr_decay, results_dir

    def start(  # type: ignore[override]
        self,
        grid: Grid,
        initial_arrays: ArrayRecord,
        num_rounds: int = 3,
        timeout: float = 3600,
        evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
    ) -> Result:
        result, arrays = Result(arrays=initial_arrays), initial_arrays
        schedule: dict[str, float] = {}
        _central(result, evaluate_fn, 0, arrays)
        for server_round in range(1, num_rounds + 1):
            lr = self.lr * self.lr_decay ** (server_round - 1)
            schedule[str(server_round)] = lr
            messages = self.configure_train(server_round, arrays, ConfigRecord({"lr": lr}), grid)
            replies = grid.send_and_receive(messages, timeout=timeout)
            new_arrays, metrics = self.aggregate_train(server_round, replies)
            if new_arrays is not None:
                result.arrays = arrays = new_arrays
            if metrics is not None:
                result.train_metrics_clientapp[server_round] = metrics
            _central(result, evaluate_fn, server_round, arrays)
        write_results(result, self.results_dir, {"lr-schedule": schedule})
        return result


def _central(
    result: Result,
    evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None,
    server_round: int,
    arrays: ArrayRecord,
) -> None:
    """Centralized evaluation of `arrays`, kept in `result` (as `Strategy.start` does)."""
    metrics = evaluate_fn(server_round, arrays) if evaluate_fn else None
    if metrics is not None:
        result.evaluate_metrics_serverapp[server_round] = metrics


def central_evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    """Loss and accuracy of the global model on the server's held-out digits."""
    net = make_net(0)
    net.load_state_dict(arrays.to_torch_state_dict())
    loss, accuracy = test(net, *server_testset())
    return MetricRecord({"central_loss": loss, "central_acc": accuracy})


def write_results(result: Result, results_dir: str, extra: dict[str, Any]) -> Path:
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
        "extra": {"final-arrays-sha256": digest.hexdigest(), **extra},
    }
    path = Path(results_dir or ".") / "results.json"
    path.write_text(json.dumps(doc, indent=1))
    return path


@app.main()
def main(grid: Grid, context: Context) -> None:
    run = context.run_config
    net = make_net(int(run["seed"]))
    strategy = ScheduledFedAvg(
        float(run["lr"]), float(run["lr-decay"]), str(run.get("results-dir", ""))
    )
    strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(net.state_dict()),
        num_rounds=int(run["num-server-rounds"]),
        evaluate_fn=central_evaluate,
    )
