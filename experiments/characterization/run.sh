#!/usr/bin/env bash
# Regenerate every committed result of experiments/characterization (README.md).
#   bash experiments/characterization/run.sh            # emulated profiles + this host
#   bash experiments/characterization/run.sh emulated   # emulated profiles only
#   bash experiments/characterization/run.sh this       # this host only
# Results go to experiments/characterization/results/<device>/<study>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=experiments/characterization/results
PROFILES=(jetson_tx2 meizu_16t pixel2 rpi4)
MODE="${1:-all}"

if [[ "$MODE" != this ]]; then
for device in "${PROFILES[@]}"; do
  /usr/bin/time -f "study=all device=$device: %e s wall, %U+%S s CPU" \
    python -m fedbench.characterize study=all device="$device" out="$OUT/$device"
done
# All ten of paper 000's models on its device (adds VGG16, Xception, Inception v1).
python -m fedbench.characterize study=batch_sweep device=jetson_tx2 models=paper \
  out="$OUT/jetson_tx2/batch_sweep_paper"
# Paper 000 trained on the TX2's GPU: the same sweep on the emulated GPU.
python -m fedbench.characterize study=batch_sweep device=jetson_tx2 processor=gpu \
  out="$OUT/jetson_tx2/batch_sweep_gpu"
# daily_accuracy trains for real (fedbench runs); the quick preset on one profile.
python -m fedbench.characterize study=daily_accuracy device=jetson_tx2 out="$OUT/jetson_tx2/daily_accuracy"
fi
[[ "$MODE" == emulated ]] && exit 0

# This host: real timed steps (warm-up excluded), smaller models and grids than the
# paper-size defaults so the whole set finishes in well under an hour on 2 cores.
# One training thread: on a host shared with other jobs, two threads in lockstep
# wait for each other's time slices at every op (cpu_config measures 1 vs 2 cores).
HOST="warmup=2 steps=3 threads=1"
python -m fedbench.characterize study=batch_sweep device=this $HOST \
  models=small_cnn,dqn,dcgan,char_cnn_lstm batches=1,4,16,64 out="$OUT/this/batch_sweep"
python -m fedbench.characterize study=cpu_config device=this $HOST out="$OUT/this/cpu_config"
python -m fedbench.characterize study=width_depth device=this $HOST \
  depths=1,2,4 widths=64,128,256 batch_size=8 out="$OUT/this/width_depth"
python -m fedbench.characterize study=op_breakdown device=this $HOST \
  models=conv_only,small_cnn,reduced_mobilenet,densenet40 batch_size=16 out="$OUT/this/op_breakdown"
# At niceness 19 against busy foreground processes the step is ~100x slower: one step.
python -m fedbench.characterize study=background device=this warmup=0 steps=1 threads=1 \
  models=small_cnn batch_size=16 out="$OUT/this/background"
python -m fedbench.characterize study=daily_accuracy device=this out="$OUT/this/daily_accuracy"
