#!/usr/bin/env bash
# Thirteenth session: does W4 B=4096 bf16 Default move between the twelfth session's final binary
# and this one (bench medians, alternating), and which kernel (ncu durations of one call's kernels).
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins ./bench_gpu ./libbenchmark.so.1debian && tar xzf .gpu-bin/old.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for i in 1 2 3; do
  for b in bench_gpu_old bench_gpu; do
    timeout 60 /tmp/bins/$b --benchmark_filter='^W4/B4096/bf16/(Default|ReduceOverhead)/' --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/w4_${b}_$i.txt 2>&1
    echo "$b $i: $(grep median $OUT/w4_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2}' | sed 's|/manual_time_median||g')"
  done
done
for b in bench_gpu_old bench_gpu; do
  echo "== $b"
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size,launch__block_size --launch-skip 40 --launch-count 8 /tmp/bins/$b --benchmark_filter='^W4/B4096/bf16/Default/' --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "^  [a-zA-Z_]|duration|registers|grid_size|block_size" | sed -E 's/\(T[0-9]+\).*//' | cut -c1-110
done
