#!/usr/bin/env bash
# Thirteenth session, final binaries (the flat pointwise path as a kernel of its own): every CUDA
# test, old (twelfth session's final bench_gpu) against new on W1, W4 B=4096 bf16, W2/W3,
# the gelu(acc + b) kernel's registers and time, memcheck on the pointwise kernels.
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins && tar xzf .gpu-bin/old.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_cuda_ops test_cuda_modes test_cuda_training test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
  timeout 120 /tmp/bins/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -30
done
F='^(Copy/f32|W1/(f32|bf16)/(Default|ReduceOverhead)|W4/B4096/bf16/(Default|ReduceOverhead)|W2/(f32|bf16)/Default|W3/(f32|bf16)/Default)/'
for i in 1 2; do
  for b in bench_gpu_old bench_gpu; do
    timeout 90 /tmp/bins/$b --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ab_${b}_$i.txt 2>&1; echo "$b $i: exit $?"
    grep median $OUT/ab_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
  done
done
timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread -k regex:pointwise_kernel --launch-skip 10 --launch-count 2 /tmp/bins/bench_gpu --benchmark_filter='^W4/B4096/bf16/Default/' --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "duration|registers" | cut -c1-110
for w in W1/f32 W1/bf16; do
  timeout 60 ncu --clock-control none --metrics smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread -k regex:pointwise_kernel --launch-skip 3 --launch-count 1 /tmp/bins/bench_gpu --benchmark_filter="^$w/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "inst_executed|duration|registers" | cut -c1-110
done
timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_dtypes -tc='*many spans*' > $OUT/memcheck_spans.txt 2>&1; echo "memcheck dtypes many spans: exit $?"; tail -1 $OUT/memcheck_spans.txt
for t in test_cuda_pointwise test_cuda_training; do
  timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/$t > $OUT/memcheck_$t.txt 2>&1; echo "memcheck $t: exit $?"; tail -1 $OUT/memcheck_$t.txt
done
cd $OUT && tar czf /tmp/out.tgz . && rm -rf $OUT/* && mv /tmp/out.tgz $OUT/out.tgz
