"""FedAvg with a central evaluation that fails: its data is missing."""

from __future__ import annotations

from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from torch import nn

app = ServerApp()


def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
    raise ValueError("evaluation data missing: no file test.npz")


@app.main()
def main(grid: Grid, context: Context) -> None:
    FedAvg().start(
        grid=grid,
        initial_arrays=ArrayRecord(nn.Linear(4, 2).state_dict()),
        num_rounds=int(context.run_config["num-server-rounds"]),
        evaluate_fn=evaluate,
    )
