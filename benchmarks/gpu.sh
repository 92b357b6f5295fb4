#!/usr/bin/env bash
# Issue 23's GPU checks on a CUDA host, in one call: the GPU tests, the GPU throughput
# benchmark and daily_densenet's start-to-exit time; everything lands under $OUT.
#
# Here (a host with a package registry), in the repository root, once (.whl/ is git-ignored):
#   KINDS_MD=/work/.library/device/KINDS.md bash ../shared/gpu/make_wheels.sh .whl
# On the GPU host (the device tool: carry .whl), in the repository root:
#   bash benchmarks/gpu.sh tests small        # the GPU tests, 100 x small_cnn   (~4 min)
#   bash benchmarks/gpu.sh densenet daily     # 32 x DenseNet40, daily_densenet   (~5 min)
# Stages: tests, small, densenet, daily (default: all four). Without .whl/ the host's own
# python3 must already have fedbench's dependencies (Flower, Ray, Hydra).
set -u -o pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-/tmp/fedbench-gpu}
mkdir -p "$out"
stages=${*:-tests small densenet daily}
site=$(mktemp -d)/site
if [ -d "$repo/.whl" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$repo"/.whl/*.whl || exit 3
fi
# This tree's fedbench over the wheel's (the wheel may be older than the checkout).
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --upgrade --target "$site" "$repo" \
  || echo "gpu.sh: could not install this tree's fedbench; using the wheel's" >&2
export PYTHONPATH=$site PATH=$site/bin:$PATH FLWR_TELEMETRY_ENABLED=0 PYTHONUNBUFFERED=1
# Run from a folder without the repository's fedbench/ (it would shadow the installed package
# under test); the tests and the pytest config are linked in.
work=$(mktemp -d)
ln -s "$repo/tests" "$work/tests"
ln -s "$repo/pyproject.toml" "$work/pyproject.toml"
cd "$work" || exit 3
{ nvidia-smi; python3 -c "import torch, fedbench; print('fedbench from', fedbench.__file__); print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"; } > "$out/host.txt" 2>&1
cat "$out/host.txt"
rc=0
for stage in $stages; do
  case $stage in
    tests)
      python3 -m pytest -p no:cacheprovider -o addopts= -m gpu -q -rs tests/train/test_gpu.py \
        tests/client/test_group.py tests/e2e/test_gpu_run.py \
        2>&1 | tee "$out/gpu_tests.txt" || rc=1 ;;
    small|densenet)
      rounds=$([ "$stage" = small ] && echo 5 || echo 2)
      { echo "# python benchmarks/throughput.py accelerator=cuda workload=$stage rounds=$rounds ($(date -u +%F), $(nproc) CPU cores)"
        python3 "$repo/benchmarks/throughput.py" accelerator=cuda workload="$stage" rounds="$rounds"
      } 2>&1 | tee "$out/throughput_gpu_$stage.txt" || rc=1 ;;
    daily)
      start=$(date +%s.%N)
      python3 -m fedbench experiment=daily_densenet runtime.accelerator=cuda hydra.run.dir="$work/daily" \
        > "$out/daily_densenet.log" 2>&1 || rc=1
      end=$(date +%s.%N)
      echo "python -m fedbench experiment=daily_densenet runtime.accelerator=cuda: start to exit $(python3 -c "print(f'{$end - $start:.1f}')") s (target <= 60 s)" \
        | tee "$out/daily_densenet.txt"
      cp "$work/daily/summary.json" "$out/daily_densenet_summary.json" 2>/dev/null ;;
    *) echo "gpu.sh: unknown stage '$stage' (tests, small, densenet, daily)" >&2; exit 2 ;;
  esac
done
exit $rc
