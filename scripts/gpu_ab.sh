#!/usr/bin/env bash
# On the device machine, from the repo root: an A/B comparison of benchmark binaries carried in
# .gpu-bin (built on the dev machine, e.g. the last commit's bench_gpu as bench_gpu.base and the
# change's as bench_gpu): each binary in turn, twice, with the same filter; the medians of 5
# repetitions. Usage: bash scripts/gpu_ab.sh '^(Copy|W2/bf16/Default)' bench_gpu.base bench_gpu
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-bin:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
f=$1; shift
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
for round in 1 2; do
  for b in "$@"; do
    echo "== $b round $round"
    timeout 120 .gpu-bin/$b --benchmark_filter="$f" --benchmark_min_time=0.05 --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 | grep "_median" | awk '{print $1, $2, $3, $NF}' | cut -c1-150
  done
done
