#!/usr/bin/env bash
# Per-device submodels vs FedAvg on emulated fleets (experiments/heterogeneous_models/README.md).
# Usage: bash experiments/heterogeneous_models/run.sh [RUNS_DIR] [SEEDS] [EXTRA OVERRIDES...]
#   default: ./submodel_runs, seeds 0,1,2, both scenarios (study_rounds: 30 rounds from scratch;
#   study_daily: 10 days from a pretrained model), both fleets, the nine arms: 108 runs.
#   FLEETS="edge_mixed" / SCENARIOS="rounds" / ARMS="heterofl_deadline fedavg_deadline" narrow it.
# Runs land in RUNS_DIR/<scenario>_<fleet>/<arm>/<seed>/. Then:
#   python experiments/heterogeneous_models/plot.py RUNS_DIR/rounds_edge_mixed
#   python -m fedbench.analyze RUNS_DIR/rounds_edge_mixed out=RUNS_DIR/rounds_edge_mixed/analysis
set -euo pipefail
runs=${1:-submodel_runs}
seeds=${2:-0,1,2}
shift $(($# > 2 ? 2 : $#))
extra=("$@")
fleets=${FLEETS:-edge_mixed phones_100}
scenarios=${SCENARIOS:-rounds daily}
arms=${ARMS:-heterofl_budget heterofl_deadline fjord_budget fjord_deadline fedrolex_budget \
fedrolex_deadline fedavg_planner fedavg_deadline fedavg_smallest}
export FLWR_TELEMETRY_ENABLED=0

overrides_of() {  # the overrides of one arm
  case $1 in
    # Submodels, the rate chosen by each device's memory budget or by the round deadline.
    heterofl_* | fjord_* | fedrolex_*) echo "algorithm=${1%_*} algorithm.rate_policy=${1##*_}" ;;
    # FedAvg with the memory planner, waiting for every device.
    fedavg_planner) echo "algorithm=fedavg round_close=all ~round_close.deadline_s" ;;
    # FedAvg that drops the devices that miss the deadline (their updates time out).
    fedavg_deadline) echo "algorithm=fedavg" ;;
    # FedAvg on the smallest model every device can hold: everyone at one fixed rate
    # (its accuracy is that rate's submodel's).
    fedavg_smallest) echo "algorithm=heterofl algorithm.rate_policy=fixed algorithm.rate=0.0625" ;;
    *) echo "run.sh: unknown arm '$1' (ARMS takes: $arms)" >&2; exit 2 ;;
  esac
}

for scenario in $scenarios; do
  for fleet in $fleets; do
    for arm in $arms; do
      read -r -a arm_overrides <<<"$(overrides_of "$arm")"
      python -m fedbench -m "experiment=study_$scenario" "+name=submodels_${scenario}_$fleet" \
        "fleet=$fleet" "seed=$seeds" "${arm_overrides[@]}" "${extra[@]}" \
        "hydra.sweep.dir=$runs/${scenario}_$fleet/$arm" 'hydra.sweep.subdir=${seed}'
    done
  done
done
