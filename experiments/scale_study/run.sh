#!/usr/bin/env bash
# The scale study's sweep (experiments/scale_study/README.md): device selection and
# FedBuff at >= 500 devices on Shakespeare's natural partition, 5 seeds.
#
# Usage: [SEEDS="0 1 2 3 4"] [ARMS="random oort pow_d fedbuff"] [OUT=/tmp/scale_study/runs] \
#        [JOBS=2] [NICE=10] bash experiments/scale_study/run.sh
#
# Each run writes OUT/<experiment>/<arm>/seed<N>/ (a fedbench run folder) and, next to it,
# seed<N>.cpu.json (the CPU seconds of its whole process tree, cputime.py) and seed<N>.log.
# A run whose summary.json says "completed" is skipped; one that was cut short is
# continued with resume=<its folder>. JOBS runs at a time (2 on the 2-core host), each
# under nice. FedBuff's synchronous baseline is no run of its own: it is the random arm
# read up to FedBuff's virtual-time budget (analyze.py). Seeds go in blocks of JOBS, each
# arm for the block's seeds in turn, so the runs of one seed never pretrain its initial
# model twice at once (the first run of a seed writes the cache the others read).
# Then: python experiments/scale_study/analyze.py OUT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
SEEDS=${SEEDS:-0 1 2 3 4}
ARMS=${ARMS:-random oort pow_d fedbuff}
OUT=${OUT:-/tmp/scale_study/runs}
JOBS=${JOBS:-2}
NICE=${NICE:-10}
export FLWR_TELEMETRY_ENABLED=0 FEDBENCH_PROGRESS=plain
SEEDS=${SEEDS//,/ }
ARMS=${ARMS//,/ }

# arm -> experiment and overrides (the arms' only differences).
args_of() {
  case $1 in
  random) echo "experiment=study_shakespeare strategy=random" ;;
  oort) echo "experiment=study_shakespeare strategy=oort" ;;
  # Power-of-choice's pow-d (docs/baselines.md: the loss ratio stands in for asking
  # each candidate); d = 3k = 150 candidates, the conf default.
  pow_d) echo "experiment=study_shakespeare strategy=power_of_choice strategy.variant=pow-d" ;;
  # FedBuff (buffer 10, 50 in flight) to a virtual-time budget: the config has it all.
  fedbuff) echo "experiment=study_shakespeare_async strategy=random" ;;
  *)
    echo "run.sh: unknown arm '$1' (random, oort, pow_d, fedbuff)" >&2
    return 2
    ;;
  esac
}

run_one() { # run_one ARM SEED
  local arm=$1 seed=$2 args experiment dir status
  args=$(args_of "$arm")
  experiment=${args%% *}
  experiment=${experiment#experiment=}
  dir=$OUT/$experiment/$arm/seed$seed
  status=$(python -c 'import json,sys; print(json.load(open(sys.argv[1])).get("status", ""))' \
    "$dir/summary.json" 2>/dev/null || true)
  if [ "$status" = completed ]; then
    echo "[scale_study] $arm seed $seed: done before ($dir)"
    return 0
  fi
  mkdir -p "$(dirname "$dir")"
  local resume=()
  [ -f "$dir/checkpoint.pt" ] && resume=("resume=$dir")
  echo "[scale_study] $arm seed $seed: start $(date -u +%H:%M:%S) -> $dir"
  # shellcheck disable=SC2086  # $args is a list of key=value words
  if nice -n "$NICE" python "$here/cputime.py" "$dir.cpu.json" -- \
    python -m fedbench $args "seed=$seed" report.plots=false "hydra.run.dir=$dir" "${resume[@]}" \
    >"$dir.log" 2>&1; then
    echo "[scale_study] $arm seed $seed: ok $(date -u +%H:%M:%S) $(tr -d '\n ' <"$dir.cpu.json" | grep -o '"cpu_s":[0-9.]*')"
  else
    echo "[scale_study] $arm seed $seed: FAILED (see $dir.log)" >&2
    return 1
  fi
}

for arm in $ARMS; do args_of "$arm" >/dev/null; done # refuse an unknown arm before any run
mkdir -p "$OUT"
failed=0
read -r -a seeds <<<"$SEEDS"
for ((first = 0; first < ${#seeds[@]}; first += JOBS)); do
  block=("${seeds[@]:first:JOBS}")
  for arm in $ARMS; do
    for seed in "${block[@]}"; do
      while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
        wait -n || failed=1
      done
      run_one "$arm" "$seed" &
    done
  done
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
  wait -n || failed=1
done
exit "$failed"
