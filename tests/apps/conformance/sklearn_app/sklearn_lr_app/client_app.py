"""The app's ClientApp (Message API): a few L-BFGS steps of LogisticRegression, no torch.

Each reply carries a `node` ConfigRecord with the client's partition-id, so the
server can aggregate in a fixed order (server_app.OrderedFedAvg).
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from sklearn_lr_app.task import fit, partition, score

app = ClientApp()


def _data(context: Context) -> tuple[int, tuple[np.ndarray, ...]]:
    pid = int(context.node_config["partition-id"])
    return pid, partition(pid, int(context.node_config["num-partitions"]))


@app.train()
def train(msg: Message, context: Context) -> Message:
    pid, (x, y, _, _) = _data(context)
    received = msg.content.array_records["arrays"].to_numpy_ndarrays()
    arrays = fit(received, x, y, int(context.run_config["local-iterations"]))
    loss, accuracy = score(arrays, x, y)
    metrics = {"train_loss": loss, "train_acc": accuracy, "num-examples": len(y)}
    content = RecordDict(
        {
            "arrays": ArrayRecord(arrays),
            "metrics": MetricRecord(metrics),
            "node": ConfigRecord({"partition-id": pid}),
        }
    )
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    pid, (_, _, x, y) = _data(context)
    loss, accuracy = score(msg.content.array_records["arrays"].to_numpy_ndarrays(), x, y)
    metrics = {"eval_loss": loss, "eval_acc": accuracy, "num-examples": len(y)}
    content = RecordDict(
        {"metrics": MetricRecord(metrics), "node": ConfigRecord({"partition-id": pid})}
    )
    return Message(content=content, reply_to=msg)
