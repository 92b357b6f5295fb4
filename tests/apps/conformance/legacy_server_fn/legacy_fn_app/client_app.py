"""The app's ClientApp, legacy style: a NumPyClient built by `client_fn`.

`fit` reports its partition-id among the metrics, so the server can aggregate in
a fixed order (server_app.OrderedFedAvg).
"""

from __future__ import annotations

from flwr.app import Context
from flwr.client import Client, ClientApp, NumPyClient
from flwr.common import NDArrays, Scalar

from legacy_fn_app.task import get_weights, make_net, partition, set_weights, test
from legacy_fn_app.task import train as train_fn


class DigitsClient(NumPyClient):
    """Trains and evaluates the global model on one partition of the digits."""

    def __init__(self, partition_id: int, num_partitions: int, epochs: int, seed: int) -> None:
        self.partition_id, self.epochs, self.seed = partition_id, epochs, seed
        self.data = partition(partition_id, num_partitions)
        self.net = make_net(0)

    def fit(
        self, parameters: NDArrays, config: dict[str, Scalar]
    ) -> tuple[NDArrays, int, dict[str, Scalar]]:
        set_weights(self.net, parameters)
        x, y, _, _ = self.data
        seed = self.seed + 1000 * int(config["server-round"]) + self.partition_id
        loss, accuracy = train_fn(self.net, x, y, self.epochs, float(config["lr"]), seed)
        metrics: dict[str, Scalar] = {
            "train_loss": loss,
            "train_acc": accuracy,
            "partition-id": self.partition_id,
        }
        return get_weights(self.net), len(y), metrics

    def evaluate(
        self, parameters: NDArrays, config: dict[str, Scalar]
    ) -> tuple[float, int, dict[str, Scalar]]:
        set_weights(self.net, parameters)
        _, _, x, y = self.data
        loss, accuracy = test(self.net, x, y)
        return loss, len(y), {"eval_acc": accuracy, "partition-id": self.partition_id}


def client_fn(context: Context) -> Client:
    run, node = context.run_config, context.node_config
    return DigitsClient(
        int(node["partition-id"]),
        int(node["num-partitions"]),
        int(run["local-epochs"]),
        int(run["seed"]),
    ).to_client()


app = ClientApp(client_fn=client_fn)
