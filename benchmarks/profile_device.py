"""How well a profile fitted by `python -m fedbench.profile_device` predicts this host.

Fits a profile on some models and batch sizes, then measures held-out cases
twice - inside the tool and again here, independently - and prints the
prediction error of each (issue target: within 25% for two models).
Timing figures: run it on a quiet host.

    python benchmarks/profile_device.py
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from fedbench.devices.profile import load_profile
from fedbench.profiling.bench import Case, run_bench
from fedbench.profiling.fit import predict

HOLDOUT = ("lenet@32", "small_cnn@32")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "this_host.yaml"
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "fedbench.profile_device",
                "--out",
                str(out),
                "--models",
                "lenet,small_cnn",
                "--batches",
                "8,16,64",
                "--holdout",
                ",".join(HOLDOUT),
                "--threads",
                "1",
                "--steps",
                "5",
                "--rounds",
                "3",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        print(run.stdout.strip())
        profile = load_profile(out)
        torch.set_num_threads(1)
        print("\nheld out, measured again here:")
        for t in run_bench([Case.parse(c) for c in HOLDOUT], steps=5, warmup=2, rounds=3):
            error = predict(profile, t.workload) / t.cpu_step_s - 1.0
            verdict = "ok" if abs(error) < 0.25 else "over the 25% target"
            print(
                f"  {str(t.case):14s} measured {1e3 * t.cpu_step_s:8.3f} ms  "
                f"predicted {1e3 * predict(profile, t.workload):8.3f} ms  {error:+6.1%}  {verdict}"
            )
        tool = re.findall(r"^(\S+)\s+holdout\s+\S+\s+\S+\s+([+-][\d.]+)%", run.stdout, re.M)
        print("in the tool: " + ", ".join(f"{c} {e}%" for c, e in tool))


if __name__ == "__main__":
    main()
