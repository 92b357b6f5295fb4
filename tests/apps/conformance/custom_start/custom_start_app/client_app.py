"""The app's ClientApp (Message API): trains with the learning rate the server sends each round.

Each reply carries a `node` ConfigRecord with the client's partition-id, so the
server can aggregate in a fixed order (see server_app.OrderedFedAvg).
"""

from __future__ import annotations

from typing import cast

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from custom_start_app.task import make_net, partition
from custom_start_app.task import train as train_fn

app = ClientApp()


def _partition(context: Context) -> tuple[int, int]:
    """(partition-id, num-partitions) of this node, as the runtime assigned them."""
    return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])


@app.train()
def train(msg: Message, context: Context) -> Message:
    pid, parts = _partition(context)
    net = make_net(0)
    net.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    x, y, _, _ = partition(pid, parts)
    server_round = int(cast(int, msg.content.config_records["config"]["server-round"]))
    run = context.run_config
    seed = int(run["seed"]) + 1000 * server_round + pid
    loss, accuracy = train_fn(
        net,
        x,
        y,
        int(run["local-epochs"]),
        float(cast(float, msg.content.config_records["config"]["lr"])),
        seed,
    )
    metrics = {"train_loss": loss, "train_acc": accuracy, "num-examples": len(y)}
    content = RecordDict(
        {
            "arrays": ArrayRecord(net.state_dict()),
            "metrics": MetricRecord(metrics),
            "node": ConfigRecord({"partition-id": pid}),
        }
    )
    return Message(content=content, reply_to=msg)
