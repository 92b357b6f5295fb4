"""The app's ClientApp (Message API): trains, and keeps its own progress in `context.state`.

`context.state` belongs to one node for the whole run: its `progress` record
counts the rounds this client trained and sums its losses, and is returned in
every reply, so a test sees whether state stays with its client.

Each reply carries a `node` ConfigRecord with the client's partition-id, so the
server can aggregate in a fixed order (see server_app.OrderedFedAvg).
"""

from __future__ import annotations

from typing import cast

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from stateful_app.task import make_net, partition
from stateful_app.task import train as train_fn

app = ClientApp()


def _partition(context: Context) -> tuple[int, int]:
    """(partition-id, num-partitions) of this node, as the runtime assigned them."""
    return int(context.node_config["partition-id"]), int(context.node_config["num-partitions"])


def _progress(context: Context) -> MetricRecord:
    """This client's progress so far (zero before its first round)."""
    if "progress" in context.state:
        return context.state.metric_records["progress"]
    return MetricRecord({"rounds-trained": 0, "loss-sum": 0.0})


@app.train()
def train(msg: Message, context: Context) -> Message:
    pid, parts = _partition(context)
    net = make_net(0)
    net.load_state_dict(msg.content.array_records["arrays"].to_torch_state_dict())
    x, y, _, _ = partition(pid, parts)
    server_round = int(cast(int, msg.content.config_records["config"]["server-round"]))
    run = context.run_config
    seed = int(run["seed"]) + 1000 * server_round + pid
    loss, accuracy = train_fn(net, x, y, int(run["local-epochs"]), float(run["lr"]), seed)
    progress = _progress(context)
    progress["rounds-trained"] = cast(int, progress["rounds-trained"]) + 1
    progress["loss-sum"] = cast(float, progress["loss-sum"]) + loss
    context.state["progress"] = progress
    metrics = {"train_loss": loss, "train_acc": accuracy, "num-examples": len(y), **progress}
    content = RecordDict(
        {
            "arrays": ArrayRecord(net.state_dict()),
            "metrics": MetricRecord(metrics),
            "node": ConfigRecord({"partition-id": pid}),
        }
    )
    return Message(content=content, reply_to=msg)
