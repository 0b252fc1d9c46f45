#!/usr/bin/env bash
# Thirteenth session: the cheaper Phi and the flat pointwise path (W1), the register path's block
# per row as a MaxAutotune candidate (W2/W3); old (twelfth session's final) against new binaries.
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins && tar xzf .gpu-bin/old.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_cuda_ops test_cuda_pointwise test_cuda_dtypes test_cuda_reduce; do
  timeout 120 /tmp/bins/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -30
done
grep "device maths at" $OUT/test_cuda_ops.log | head -3
F='^(Copy/f32|W1/(f32|bf16)/(Default|ReduceOverhead))/'
for i in 1 2; do
  for b in bench_gpu_old bench_gpu; do
    timeout 90 /tmp/bins/$b --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/w1_${b}_$i.txt 2>&1; echo "$b $i: exit $?"
    grep median $OUT/w1_${b}_$i.txt | awk '{print $1, $2, $3}'
  done
done
export KILN_CACHE_DIR=$(mktemp -d)
KILN_BENCH_EXPLAIN=1 timeout 90 /tmp/bins/bench_gpu --benchmark_filter='^W1/(f32|bf16)/MaxAutotune/' --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/w1_ma.txt 2> $OUT/w1_ma_explain.txt; echo "W1 MaxAutotune: exit $?"
grep median $OUT/w1_ma.txt | awk '{print $1, $2, $3}'
grep -E "autotune: chose" $OUT/w1_ma_explain.txt | cut -c1-900 | head -4
for b in bench_gpu_old bench_gpu; do
  export KILN_CACHE_DIR=$(mktemp -d)
  KILN_BENCH_EXPLAIN=1 timeout 120 /tmp/bins/$b --benchmark_filter='^W(2|3)/bf16/(Default|MaxAutotune)/|^W4/B4096/bf16/(Default|MaxAutotune)/' --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/rows_$b.txt 2> $OUT/rows_explain_$b.txt; echo "$b rows: exit $?"
  grep median $OUT/rows_$b.txt | awk '{print $1, $2, $3}'
  grep -E "autotune: chose" $OUT/rows_explain_$b.txt | cut -c1-700 | head -8
done
for w in W1/f32 W1/bf16; do
  timeout 60 ncu --clock-control none --metrics smsp__inst_executed.sum,gpu__time_duration.sum,sm__inst_executed_pipe_xu.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:pointwise_kernel --launch-skip 3 --launch-count 1 /tmp/bins/bench_gpu --benchmark_filter="^$w/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "inst_executed|duration|dram__|warps_active" | cut -c1-120
done
timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_dtypes -tc='*many blocks*' > $OUT/memcheck_spans.txt 2>&1; echo "memcheck many spans: exit $?"; tail -1 $OUT/memcheck_spans.txt
