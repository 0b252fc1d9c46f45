#!/usr/bin/env bash
# Thirteenth session: ncu of the bandwidth workloads' kernels (W1 f32/bf16 pointwise, W2/W3 bf16 rows).
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem --format=csv
for w in W1/f32 W1/bf16 W2/bf16 W3/bf16; do
  tag=$(echo $w | tr / _)
  timeout 100 ncu --clock-control none --set full -k regex:"pointwise_kernel|row_reduce_kernel" --launch-skip 3 --launch-count 1 -o /tmp/$tag /tmp/bins/bench_gpu --benchmark_filter="^$w/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 > $OUT/run_$tag.txt 2>&1; echo "$w ncu: exit $?"
  ncu -i /tmp/$tag.ncu-rep --page details > $OUT/details_$tag.txt 2>&1
  ncu -i /tmp/$tag.ncu-rep --page raw --csv > $OUT/raw_$tag.csv 2>&1
  grep -E "^  [a-z_:]+ |Duration|DRAM Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Eligible Warps|Warp Cycles Per Issued|No Eligible|Executed Ipc A" $OUT/details_$tag.txt | head -24
done
ncu -i /tmp/W1_bf16.ncu-rep --page source --print-source sass --csv > $OUT/sass_W1_bf16.csv 2>&1
ls -la $OUT | head
