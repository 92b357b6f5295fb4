"""The app's ClientApp (Flower Message API)."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from quickstart_app.task import Net, load_data, test
from quickstart_app.task import train as train_fn

app = ClientApp()


@app.train()
def train(msg: Message, context: Context) -> Message:
    net = Net(int(context.run_config["hidden"]))
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    pid, parts = context.node_config["partition-id"], context.node_config["num-partitions"]
    x, y, _, _ = load_data(int(pid), int(parts))
    loss = train_fn(
        net,
        x,
        y,
        int(context.run_config["local-epochs"]),
        float(msg.content["config"]["lr"]),
        int(context.run_config["batch-size"]),
    )
    content = RecordDict(
        {
            "arrays": ArrayRecord(net.state_dict()),
            "metrics": MetricRecord({"train_loss": loss, "num-examples": len(y)}),
        }
    )
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    net = Net(int(context.run_config["hidden"]))
    net.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    pid, parts = context.node_config["partition-id"], context.node_config["num-partitions"]
    _, _, x, y = load_data(int(pid), int(parts))
    loss, accuracy = test(net, x, y)
    metrics = MetricRecord({"eval_loss": loss, "eval_acc": accuracy, "num-examples": len(y)})
    return Message(content=RecordDict({"metrics": metrics}), reply_to=msg)
