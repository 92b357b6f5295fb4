"""The ServerApp: runs one fedbench experiment on whatever Grid Flower gives it.

In simulation the experiment is handed over in-process; under `flwr run`
(deployment) it arrives as JSON in the run config key `fedbench-config`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedbench.app.experiment import run_experiment
from fedbench.config import EXPERIMENT_KEY
from fedbench.errors import FedbenchError


def make_server_app(experiment: dict[str, Any] | None = None) -> ServerApp:
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        exp = experiment
        if exp is None:
            text = context.run_config.get(EXPERIMENT_KEY, "")
            if not isinstance(text, str) or not text:
                raise FedbenchError(f"run config has no '{EXPERIMENT_KEY}'")
            exp = json.loads(text)
        run_experiment(grid, exp, Path(exp["output_dir"]))

    return app


app = make_server_app()
