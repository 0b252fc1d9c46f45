#!/usr/bin/env bash
# Fourteenth session, third call: cuBLASLt adds the bias of epilogues it cannot apply whole and
# the rest runs as a row kernel (flat where it can). Old = 3a9a47b's binaries (.gpu-bin/bins.tgz),
# new = the split's (.gpu-bin/bins3.tgz). The tests whose GEMMs it changes, memcheck on the new
# case, old and new bench_gpu alternating on W4, MaxAutotune's W4 B=4096 choices, and ncu's
# kernel durations of one W4 B=4096 bf16 call.
set -u
mkdir -p /tmp/old /tmp/new && tar xzf .gpu-bin/bins.tgz -C /tmp/old && tar xzf .gpu-bin/bins3.tgz -C /tmp/new
cp /tmp/old/libbenchmark.so.1debian /tmp/new/
export LD_LIBRARY_PATH=/tmp/new:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_cuda_dtypes test_cuda_ops_suites test_cuda_modes test_cuda_ops test_cuda_reduce test_cuda_training; do
  timeout 120 /tmp/new/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -40
done
timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_dtypes -tc='cuBLASLt*' > $OUT/memcheck_split.txt 2>&1; echo "memcheck cuBLASLt cases: exit $?"; tail -n1 $OUT/memcheck_split.txt
F='^(Copy/f32|W4/B4096/(f32|bf16)/(Default|ReduceOverhead)|W4/B(16|256)/bf16/ReduceOverhead)/'
for i in 1 2; do
  for b in old new; do
    timeout 90 /tmp/$b/bench_gpu --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ab_${b}_$i.txt 2>&1; echo "$b $i: exit $?"
    grep median $OUT/ab_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
  done
done
export KILN_CACHE_DIR=$(mktemp -d)
KILN_BENCH_EXPLAIN=1 timeout 100 /tmp/new/bench_gpu --benchmark_filter='^W4/B4096/(f32|bf16)/MaxAutotune/' --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ma.txt 2> $OUT/ma_explain.txt; echo "MaxAutotune: exit $?"
grep median $OUT/ma.txt | awk '{print $1, $2, $3}'
grep -E "autotune: chose" $OUT/ma_explain.txt | cut -c1-600
for b in old new; do
  echo "ncu $b W4 B=4096 bf16 Default, one call:"
  timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread --launch-skip 12 --launch-count 4 /tmp/$b/bench_gpu --benchmark_filter="^W4/B4096/bf16/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "^  [a-zA-Z_].*\(|duration|registers" | sed 's/(int, int, int)//' | cut -c1-150
done
