#!/usr/bin/env bash
# On the device machine, from the repo root, with binaries built elsewhere and carried in
# ${KILN_GPU_BIN:-.gpu-bin} (tests, bench_gpu, bench_gpu_train, and the libbenchmark.so.1* they
# were linked against). Results go to $OUT (the device tool returns at most 8 files from it).
#   CHECK=1               scripts/gpu_check.sh (KILN_SANITIZE as there); logs in /tmp/check
#   BENCH_FILTER=regex    bench_gpu with that filter, 3 repetitions (BENCH_S: timeout)
#   TRAIN=1               bench_gpu_train
#   NCU_FILTER=regex      ncu (real clocks, warm caches) over that bench case's kernels
#                         (NCU_BIN, NCU_KERNEL, NCU_SKIP, NCU_COUNT)
# Example (device tool, carry [".gpu-bin"]): BENCH_FILTER='^W4/B1/' bash scripts/gpu_prebuilt.sh
set -u
BIN=${KILN_GPU_BIN:-.gpu-bin}
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/$BIN:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
if [ -n "${CHECK:-}" ]; then
  mkdir -p /tmp/check
  KILN_GPU_BIN=$BIN OUT=/tmp/check bash scripts/gpu_check.sh 2>&1 | tee "$OUT/check.txt"
  grep -h "device maths" /tmp/check/test_cuda_ops.log >> "$OUT/check.txt"
fi
common="--benchmark_min_time=0.05 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true"
if [ -n "${BENCH_FILTER:-}" ]; then
  timeout "${BENCH_S:-200}" "$BIN/bench_gpu" --benchmark_filter="$BENCH_FILTER" $common \
    --benchmark_out="$OUT/bench.json" --benchmark_out_format=json 2>&1 | grep -v "_mean\|_stddev\|_cv" | tee "$OUT/bench.txt"
fi
if [ -n "${TRAIN:-}" ]; then
  timeout 200 "$BIN/bench_gpu_train" $common 2>&1 | grep -v "_mean\|_stddev\|_cv" | tee "$OUT/train.txt"
fi
if [ -n "${NCU_FILTER:-}" ]; then
  timeout "${NCU_S:-200}" ncu --clock-control none --cache-control none \
    --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread \
    ${NCU_KERNEL:+-k regex:$NCU_KERNEL} --launch-skip "${NCU_SKIP:-0}" --launch-count "${NCU_COUNT:-20}" "$BIN/${NCU_BIN:-bench_gpu}" \
    --benchmark_filter="$NCU_FILTER" --benchmark_min_time=0.001 --benchmark_repetitions=1 > "$OUT/ncu.txt" 2>&1
  grep -E "^  [a-z_]+.*\(|gpu__time|throughput|grid_size|registers" "$OUT/ncu.txt" | cut -c1-200 | head -120
fi
