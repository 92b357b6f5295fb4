"""Framework overhead: one round through fedbench vs. a plain PyTorch loop.

Both sides train the same N devices, on the same data (each device's day-d
samples of the daily scenario), from the same global weights, with the same
local SGD, then average the updates. fedbench goes through Flower's
simulation engine on Ray (messages, serialisation, actors, records); the
plain loop trains the devices one after another in this process with all
cores. Each side runs `rounds=` rounds; the first is warm-up (actor start,
first-touch allocations) and excluded. Reported: median round wall time of
each side and their ratio, measured side by side in one run.

    python benchmarks/overhead.py devices=4 rounds=4
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import yaml

from fedbench.cli.grammar import Grammar, Key, parse_int, script
from fedbench.experiment.schema import Experiment

OVERRIDES = [
    "model=densenet40",
    "scenario=daily",
    "scenario.pretrain.epochs=0",
    "train.batch_size=16",
    "train.local_epochs=1",
]


def fedbench_rounds(devices: int, rounds: int, out: Path) -> tuple[list[float], Experiment]:
    run_dir = out / "fedbench"
    cmd = [
        sys.executable,
        "-m",
        "fedbench",
        *OVERRIDES,
        f"scenario.days={rounds}",
        f"fleet.devices.0.count={devices}",
        f"strategy.clients_per_round={devices}",
        f"hydra.run.dir={run_dir}",
    ]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    summary = json.loads((run_dir / "summary.json").read_text())
    experiment = Experiment.from_config(yaml.safe_load((run_dir / "config.yaml").read_text()))
    return [d["round_wall_s"] for d in summary["days"][1:]], experiment


def plain_rounds(experiment: Experiment, devices: int, rounds: int) -> list[float]:
    from fedbench.client.handler import train_params
    from fedbench.experiment.build import build_model
    from fedbench.scenarios.base import build_scenario
    from fedbench.scenarios.context import data_context
    from fedbench.train.average import weighted_state
    from fedbench.train.loop import train_local

    torch.set_num_threads(os.cpu_count() or 1)
    ctx = data_context(experiment, devices)
    scenario = build_scenario(experiment)
    params = train_params(experiment, None)
    torch.manual_seed(0)
    global_state = build_model(experiment.model).state_dict()
    times = []
    for day in range(1, rounds + 1):
        start = time.perf_counter()
        updates, sizes = [], []
        for i in range(devices):
            model = build_model(experiment.model)
            model.load_state_dict(global_state)
            data = scenario.device_data(ctx, i, day)
            train_local(model, data, params, seed=day * 100 + i)
            updates.append(model.state_dict())
            sizes.append(len(data))
        global_state = weighted_state(updates, sizes)
        times.append(time.perf_counter() - start)
    return times


GRAMMAR = Grammar(
    "python benchmarks/overhead.py",
    __doc__.splitlines()[0],
    (
        Key("devices", "devices training each round", "4"),
        Key("rounds", "rounds per side (the first is warm-up)", "4"),
    ),
    ("python benchmarks/overhead.py", "python benchmarks/overhead.py devices=4 rounds=4"),
)


def run(o: dict[str, str]) -> None:
    devices, rounds = parse_int("devices", o["devices"], 1), parse_int("rounds", o["rounds"], 2)
    with tempfile.TemporaryDirectory() as tmp:
        fb, experiment = fedbench_rounds(devices, rounds, Path(tmp))
        plain = plain_rounds(experiment, devices, rounds)
    fb_med, plain_med = statistics.median(fb[1:]), statistics.median(plain[1:])
    print(
        f"devices={devices} model=densenet40 samples/device/round="
        f"{experiment.scenario.params['new_samples_per_day']} batch={experiment.train.batch_size}"
    )
    print(f"fedbench rounds (s): {', '.join(f'{t:.2f}' for t in fb)}")
    print(f"plain    rounds (s): {', '.join(f'{t:.2f}' for t in plain)}")
    print(
        f"median after warm-up: fedbench {fb_med:.2f}s, plain {plain_med:.2f}s, "
        f"ratio {fb_med / plain_med:.3f} (target <= 1.15)"
    )


if __name__ == "__main__":
    sys.exit(script(GRAMMAR, run))
