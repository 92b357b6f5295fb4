#!/usr/bin/env bash
# Sync FedAvg vs FedBuff on the virtual clock (experiments/async_study/README.md).
# Usage: bash experiments/async_study/run.sh [RUNS_DIR]   (default: ./async_runs)
# Then:  python -m fedbench.analyze RUNS_DIR out=experiments/async_study/results \
#          baseline=random title="Async study: sync FedAvg vs FedBuff"
set -euo pipefail
runs=${1:-async_runs}
export FLWR_TELEMETRY_ENABLED=0
seeds=0,1,2
sweep() {  # sweep FLEET ARM OVERRIDES...: one experiment name per fleet
  local fleet=$1 arm=$2
  shift 2
  python -m fedbench -m experiment=study_rounds "+name=async_$fleet" "seed=$seeds" "$@" \
    "hydra.sweep.dir=$runs/$fleet/$arm" 'hydra.sweep.subdir=${hydra.job.num}'
}
# edge_mixed: 20 devices, 5 a round (the strategy study's setting).
# Synchronous rounds await all their devices, or are cut at the study's 1.5 s deadline;
# FedBuff keeps as many devices in flight and aggregates a buffer of one round's worth.
sweep edge_mixed sync_deadline mode=sync round_close=deadline
sweep edge_mixed sync_all mode=sync round_close=all '~round_close.deadline_s'
sweep edge_mixed fedbuff mode=fedbuff mode.buffer_size=5
# The same mix, 100 devices, 10 a round. Each device holds a fifth of the data, so
# round trips are shorter: the deadline is again about their 80th percentile (1.0 s).
large=(+fleet.scale=100 strategy.clients_per_round=10)
sweep edge_mixed_100 sync_deadline "${large[@]}" mode=sync round_close=deadline \
  round_close.deadline_s=1.0
sweep edge_mixed_100 sync_all "${large[@]}" mode=sync round_close=all '~round_close.deadline_s'
sweep edge_mixed_100 fedbuff "${large[@]}" mode=fedbuff mode.buffer_size=10
