"""Where the headline scenario's day-0 accuracy diverges between hosts, and by how much.

The same seed gave a pretrained DenseNet40 of 67.97% on a 2-core host and
92.48% on a 16-core AVX-512 host (issue 31). This script pretrains it as
`python -m fedbench experiment=daily_densenet` does, once per *variant*: one
source of divergence changed, everything else held, each in its own process
(the ISA variables must be set before torch loads):

- intra-op threads: 1, 2, 8, 16 (on a 2-core host 8 and 16 oversubscribe it:
  slower, but they split the sums as a 16-core host does);
- ATen's CPU capability (`ATEN_CPU_CAPABILITY=default|avx2|avx512`; a level
  the CPU lacks falls back, and the table says what torch reports);
- oneDNN's ISA (`ONEDNN_MAX_CPU_ISA`), which picks the convolution kernels;
- the initialisation seed and the data-order seed (what a different torch
  version's random streams would change);
- `torch.use_deterministic_algorithms(True)` (its cost, and whether it
  changes a bit on the CPU).

Each variant runs both recipes: `old` (a constant learning rate to the last
step, BatchNorm statistics as training left them: fedbench before issue 31)
and `new` (fedbench/conf/scenario/daily.yaml: warm-up, cosine decay, BatchNorm
re-estimated). It prints one table row per variant: the test accuracy of the
pretrained model (day 0), whether its weights are bit-identical to the
reference's, and the pretraining's seconds as a ratio to the reference's.

    python experiments/reproducibility/measure.py                  # every variant, both recipes
    python experiments/reproducibility/measure.py --variants threads=1 threads=16 --epochs 2
    python experiments/reproducibility/measure.py --curve threads=2  # per-epoch loss and accuracy

Results: experiments/reproducibility/results/ (README.md there says how they were made).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

EXPERIMENT = "daily_densenet"
RECIPES: dict[str, dict[str, Any]] = {
    "old": {"schedule": "constant", "warmup_fraction": 0.0, "bn_recalibrate": False},
    "new": {},  # the scenario's own pretrain config
}
EVAL_THREADS = (1, 2, 16)


@dataclass(frozen=True)
class Variant:
    name: str
    threads: int = 2
    env: dict[str, str] = field(default_factory=dict)
    init_seed: int = 0
    order_seed: int = 0
    deterministic: bool = False


VARIANTS = {
    v.name: v
    for v in (
        Variant("threads=2"),  # the reference: this 2-core host's default
        Variant("threads=1", threads=1),
        Variant("threads=8", threads=8),
        Variant("threads=16", threads=16),
        Variant("aten=default", env={"ATEN_CPU_CAPABILITY": "default"}),
        Variant("aten=avx512", env={"ATEN_CPU_CAPABILITY": "avx512"}),
        Variant("onednn=avx", env={"ONEDNN_MAX_CPU_ISA": "AVX"}),
        Variant("onednn=sse41", env={"ONEDNN_MAX_CPU_ISA": "SSE41"}),
        Variant("init_seed=1", init_seed=1),
        Variant("order_seed=1", order_seed=1),
        Variant("deterministic", deterministic=True),
    )
}
REFERENCE = "threads=2"


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Pretrain once per recipe under this process's environment; what came out."""
    import torch

    from fedbench.core.numerics import environment, state_sha256
    from fedbench.experiment.compose import compose_experiment
    from fedbench.experiment.fleet import expand_fleet
    from fedbench.scenarios.base import build_scenario
    from fedbench.scenarios.context import data_context

    variant = Variant(**spec["variant"])
    torch.use_deterministic_algorithms(variant.deterministic)
    experiment = compose_experiment([f"experiment={EXPERIMENT}", *spec["overrides"]])
    scenario = build_scenario(experiment)
    ctx = data_context(experiment, len(expand_fleet(experiment.fleet)))
    splits = ctx.splits
    return {
        "variant": variant.name,
        "numerics": environment(),
        "data_sha256": state_sha256({"server": splits.server.x, "test": splits.test.x}),
        "recipes": {
            recipe: pretrain_once(
                experiment,
                replace(scenario.pretrain, **RECIPES[recipe], **spec["pretrain"]),
                variant,
                splits,
                spec["curve"],
            )
            for recipe in spec["recipes"]
        },
    }


def pretrain_once(
    experiment: Any, params: Any, variant: Variant, splits: Any, with_curve: bool
) -> dict[str, Any]:
    """One pretraining as the server runs it; its accuracy at each evaluation thread count."""
    import torch

    from fedbench.core.numerics import fixed_threads, state_sha256
    from fedbench.experiment.build import build_model
    from fedbench.scenarios.pretrain import pretrain
    from fedbench.train.loop import evaluate

    curve: list[dict[str, float]] = []
    with fixed_threads(variant.threads):
        torch.manual_seed(variant.init_seed)
        model = build_model(experiment.model)
        init = state_sha256(model.state_dict())

        def epoch_done(epoch: int, loss: float) -> None:
            if with_curve:
                test_loss, accuracy = evaluate(model, splits.test)
                model.train()  # train_local sets it once, before the first epoch
                point = {"train_loss": loss, "test_loss": test_loss, "accuracy": accuracy}
                curve.append({"epoch": epoch, **point})

        start, cpu = time.perf_counter(), time.process_time()
        train_loss = pretrain(model, splits.server, params, variant.order_seed, epoch_done)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    accuracy = {}
    for threads in EVAL_THREADS:
        with fixed_threads(threads):
            accuracy[str(threads)] = evaluate(model, splits.test)[1]
    return {
        "pretrain": asdict(params),
        "train_loss": train_loss,
        "accuracy": accuracy,
        "init_sha256": init,
        "weights_sha256": state_sha256(model.state_dict()),
        "seconds": wall,
        "cpu_seconds": cpu,
        "curve": curve,
    }


def run_variant(variant: Variant, args: argparse.Namespace) -> dict[str, Any]:
    spec = {
        "variant": asdict(variant),
        "recipes": args.recipes,
        "overrides": args.overrides,
        "pretrain": {"epochs": args.epochs} if args.epochs else {},
        "curve": args.curve,
    }
    env = {**os.environ, **variant.env, "OMP_WAIT_POLICY": "PASSIVE"}  # oversubscribed: no spin
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{variant.name} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def table(results: list[dict[str, Any]], recipes: list[str]) -> str:
    ref = next((r for r in results if r["variant"] == REFERENCE), results[0])
    lines = [
        "| variant | ATen capability | "
        + " | ".join(
            f"{r} day 0 (eval 1/2/16 thr) | {r} bits = ref | {r} s / ref s" for r in recipes
        )
        + " |",
        "|---|---|" + "---|---|---|" * len(recipes),
    ]
    for res in results:
        cells = [res["variant"], str(res["numerics"]["cpu_capability"])]
        for r in recipes:
            mine, base = res["recipes"][r], ref["recipes"][r]
            acc = "/".join(f"{100 * a:.2f}" for a in mine["accuracy"].values())
            same = "yes" if mine["weights_sha256"] == base["weights_sha256"] else "no"
            cells += [acc, same, f"{mine['seconds'] / base['seconds']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES), choices=list(RECIPES))
    parser.add_argument(
        "--epochs", type=int, default=0, help="pretraining epochs; 0: as configured"
    )
    parser.add_argument("--curve", action="store_true", help="test accuracy after every epoch")
    parser.add_argument("--jobs", type=int, default=1, help="variants run at once")
    parser.add_argument("--out", type=Path, help="write the results (JSON) here")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a fedbench override (repeatable), e.g. --set seed=1",
    )
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    # The reference first: every other row is compared with it.
    names = sorted(args.variants, key=lambda n: n != REFERENCE)
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda n: run_variant(VARIANTS[n], args), names))
    print(table(results, args.recipes))
    if args.curve:
        for res in results:
            for r in args.recipes:
                print(f"\n{res['variant']} {r}: epoch, train loss, test loss, test accuracy")
                for p in res["recipes"][r]["curve"]:
                    loss, test_loss, acc = p["train_loss"], p["test_loss"], p["accuracy"]
                    print(f"  {p['epoch']:2d}  {loss:.4f}  {test_loss:.4f}  {acc:.4f}")
    if args.out:
        args.out.write_text(json.dumps({"argv": sys.argv[1:], "results": results}, indent=1) + "\n")


if __name__ == "__main__":
    main()
