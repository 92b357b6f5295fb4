#!/usr/bin/env bash
# Per-device submodels vs FedAvg on emulated fleets (experiments/heterogeneous_models/README.md).
# Usage: bash experiments/heterogeneous_models/run.sh [RUNS_DIR] [SEEDS] [EXTRA OVERRIDES...]
#   default: ./submodel_runs, seeds 0,1,2, the study_rounds setup (30 rounds).
# Then:  python experiments/heterogeneous_models/plot.py RUNS_DIR
set -euo pipefail
runs=${1:-submodel_runs}
seeds=${2:-0,1,2}
shift $(($# > 2 ? 2 : $#))
extra=("$@")
export FLWR_TELEMETRY_ENABLED=0
sweep() {  # sweep FLEET ARM OVERRIDES...
  local fleet=$1 arm=$2
  shift 2
  python -m fedbench -m experiment=study_rounds "+name=submodels_$fleet" "seed=$seeds" \
    "$@" "${extra[@]}" "hydra.sweep.dir=$runs/$fleet/$arm" 'hydra.sweep.subdir=${hydra.job.num}'
}
for fleet in edge_mixed phones_100; do
  f=(fleet=$fleet)
  # Submodels, the rate chosen by each device's memory budget and by the round deadline.
  for algo in heterofl fjord fedrolex; do
    sweep $fleet ${algo}_budget "${f[@]}" algorithm=$algo algorithm.rate_policy=budget
    sweep $fleet ${algo}_deadline "${f[@]}" algorithm=$algo algorithm.rate_policy=deadline
  done
  # FedAvg with the memory planner, waiting for every device.
  sweep $fleet fedavg_planner "${f[@]}" algorithm=fedavg round_close=all '~round_close.deadline_s'
  # FedAvg that drops the devices that miss the deadline (their updates time out).
  sweep $fleet fedavg_deadline "${f[@]}" algorithm=fedavg
  # FedAvg on the smallest model every device can hold: everyone at one fixed rate
  # (its accuracy is accuracy@r<rate> in summary.json).
  sweep $fleet fedavg_smallest "${f[@]}" algorithm=heterofl algorithm.rate_policy=fixed \
    algorithm.rate=0.0625
done
