"""The app's ServerApp (Flower Message API): FedAvg with federated evaluation."""

from __future__ import annotations

import torch
from flwr.app import ArrayRecord, ConfigRecord, Context
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg

from quickstart_app.task import Net

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    torch.manual_seed(0)
    net = Net(int(context.run_config["hidden"]))
    strategy = FedAvg(fraction_train=float(context.run_config["fraction-train"]))
    result = strategy.start(
        grid=grid,
        initial_arrays=ArrayRecord(net.state_dict()),
        train_config=ConfigRecord({"lr": float(context.run_config["lr"])}),
        num_rounds=int(context.run_config["num-server-rounds"]),
    )
    torch.save(result.arrays.to_torch_state_dict(), "final_model.pt")
