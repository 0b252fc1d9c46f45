#!/usr/bin/env bash
# Thirteenth session, final binaries. Part "check": every CUDA test, the quickstart, old (twelfth
# session's final bench_gpu) against new on W1-W3, MaxAutotune's W1 and W4 candidates, ncu's
# instruction counts, memcheck on the pointwise kernels. Part "bench": the full run.
set -u
part=${1:-check}
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
if [ "$part" = check ]; then
  tar xzf .gpu-bin/old.tgz -C /tmp/bins
  for t in test_cuda_ops test_cuda_modes test_cuda_training test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
    timeout 120 /tmp/bins/$t > $OUT/$t.log 2>&1; rc=$?
    echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
    [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -30
  done
  timeout 30 /tmp/bins/gpu_quickstart 2>&1 | tail -2
  F='^(Copy/f32|W1/(f32|bf16)/(Default|ReduceOverhead)|W2/(f32|bf16)/Default|W3/(f32|bf16)/Default)/'
  for i in 1 2; do
    for b in bench_gpu_old bench_gpu; do
      timeout 90 /tmp/bins/$b --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ab_${b}_$i.txt 2>&1; echo "$b $i: exit $?"
      grep median $OUT/ab_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
    done
  done
  export KILN_CACHE_DIR=$(mktemp -d)
  KILN_BENCH_EXPLAIN=1 timeout 150 /tmp/bins/bench_gpu --benchmark_filter='^W1/(f32|bf16)/MaxAutotune/|^W4/B(1|4096)/bf16/MaxAutotune/' --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ma.txt 2> $OUT/ma_explain.txt; echo "MaxAutotune: exit $?"
  grep median $OUT/ma.txt | awk '{print $1, $2, $3}'
  grep -E "autotune: chose" $OUT/ma_explain.txt | cut -c1-900
  for w in W1/f32 W1/bf16; do
    timeout 60 ncu --clock-control none --metrics smsp__inst_executed.sum,gpu__time_duration.sum -k regex:pointwise_kernel --launch-skip 3 --launch-count 1 /tmp/bins/bench_gpu --benchmark_filter="^$w/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "inst_executed|duration" | cut -c1-120
  done
  timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_dtypes -tc='*many spans*' > $OUT/memcheck_spans.txt 2>&1; echo "memcheck dtypes many spans: exit $?"; tail -1 $OUT/memcheck_spans.txt
  for t in test_cuda_pointwise test_cuda_ops; do
    timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/$t > $OUT/memcheck_$t.txt 2>&1; echo "memcheck $t: exit $?"; tail -1 $OUT/memcheck_$t.txt
  done
  cd $OUT && tar czf /tmp/out.tgz . && rm -rf $OUT/* && mv /tmp/out.tgz $OUT/out.tgz
else
  mkdir -p $OUT/bench
  KILN_GPU_BIN=/tmp/bins OUT=$OUT/bench timeout 570 bash scripts/bench_gpu.sh > $OUT/bench.txt 2>&1; echo "bench_gpu.sh: exit $?"
  grep -E "^W|^Copy|torch|exit" $OUT/bench.txt | head -80
  rm -f $OUT/bench/kiln.json
  cd $OUT && tar czf /tmp/out.tgz . && rm -rf $OUT/* && mv /tmp/out.tgz $OUT/out.tgz
fi
