#!/usr/bin/env bash
# Thirteenth session, candidate final binaries: every CUDA test, the quickstart, old (twelfth
# session's final bench_gpu) against new on W1-W3, MaxAutotune's candidate times, sanitizers.
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins && tar xzf .gpu-bin/old.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_cuda_ops test_cuda_modes test_cuda_training test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
  timeout 120 /tmp/bins/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -30
done
[ -x /tmp/bins/gpu_quickstart ] && timeout 30 /tmp/bins/gpu_quickstart 2>&1 | tail -2
F='^(Copy/f32|W1/(f32|bf16)/Default|W2/(f32|bf16)/Default|W3/(f32|bf16)/Default)/'
for i in 1 2; do
  for b in bench_gpu_old bench_gpu; do
    timeout 90 /tmp/bins/$b --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ab_${b}_$i.txt 2>&1; echo "$b $i: exit $?"
    grep median $OUT/ab_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
  done
done
export KILN_CACHE_DIR=$(mktemp -d)
KILN_BENCH_EXPLAIN=1 timeout 150 /tmp/bins/bench_gpu --benchmark_filter='^W(1|2|3)/(f32|bf16)/MaxAutotune/' --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ma.txt 2> $OUT/ma_explain.txt; echo "MaxAutotune: exit $?"
grep median $OUT/ma.txt | awk '{print $1, $2, $3}'
grep -E "autotune: chose" $OUT/ma_explain.txt | cut -c1-1500
for w in W1/f32 W1/bf16; do
  timeout 60 ncu --clock-control none --metrics smsp__inst_executed.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed -k regex:pointwise_kernel --launch-skip 3 --launch-count 1 /tmp/bins/bench_gpu --benchmark_filter="^$w/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "inst_executed|duration|dram__" | cut -c1-120
done
timeout 60 ncu --clock-control none --metrics smsp__inst_executed.sum,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:row_reduce_kernel --launch-skip 3 --launch-count 1 /tmp/bins/bench_gpu --benchmark_filter="^W3/bf16/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "inst_executed|duration|dram__|registers|warps_active" | cut -c1-120
timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_dtypes -tc='*many spans*' > $OUT/memcheck_spans.txt 2>&1; echo "memcheck many blocks: exit $?"; tail -1 $OUT/memcheck_spans.txt
timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_reduce > $OUT/memcheck_reduce.txt 2>&1; echo "memcheck reduce: exit $?"; tail -1 $OUT/memcheck_reduce.txt
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/bins/test_cuda_reduce > $OUT/racecheck_reduce.txt 2>&1; echo "racecheck reduce: exit $?"; tail -1 $OUT/racecheck_reduce.txt
