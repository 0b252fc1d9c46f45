#!/usr/bin/env bash
# Fifteenth session, first full call: bias gradients written by the weight gradient's GEMM
# (cuBLASLt's BGRADA; schedule::fold_bias_gradients, prepare_bias_gradients) and GEMM epilogues
# without pointwise kernel 1 (run_epilogue). Old = 7bd1209's binaries (.gpu-bin/bins4.tgz), new =
# this change's (.gpu-bin/bins5.tgz). Every CUDA test, memcheck and racecheck on the new cases,
# old and new bench_gpu_train (W5) and bench_gpu (W4) alternating.
set -u
mkdir -p /tmp/old /tmp/new && tar xzf .gpu-bin/bins4.tgz -C /tmp/old && tar xzf .gpu-bin/bins5.tgz -C /tmp/new
for d in old new; do cp .gpu-bin/libbenchmark.so.1.7.1 /tmp/$d/libbenchmark.so.1debian; done
export LD_LIBRARY_PATH=/tmp/new:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=$(mktemp -d)
for t in test_cuda_modes test_cuda_training test_cuda_ops test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
  timeout 150 /tmp/new/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A14 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -40
done
timeout 30 /tmp/new/gpu_quickstart 2>&1 | tail -1
for tool in memcheck racecheck; do
  timeout 120 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_modes -tc='*bias gradient*' > $OUT/${tool}_bgrad.txt 2>&1; echo "$tool bias-gradient cases: exit $?"; tail -n1 $OUT/${tool}_bgrad.txt
done
timeout 150 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_training > $OUT/memcheck_training.txt 2>&1; echo "memcheck training: exit $?"; tail -n1 $OUT/memcheck_training.txt
timeout 120 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_dtypes -tc='GEMM epilogues*' > $OUT/memcheck_epi.txt 2>&1; echo "memcheck GEMM epilogue cases: exit $?"; tail -n1 $OUT/memcheck_epi.txt
for i in 1 2 3; do
  for b in old new; do
    timeout 100 /tmp/$b/bench_gpu_train --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/w5_${b}_$i.txt 2>&1; echo "W5 $b $i: exit $?"
    grep median $OUT/w5_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
  done
done
F='^(W4/B1/(f32|bf16)/ReduceOverhead|W4/B4096/(f32|bf16)/(Default|ReduceOverhead))/'
for i in 1 2; do
  for b in old new; do
    timeout 90 /tmp/$b/bench_gpu --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/w4_${b}_$i.txt 2>&1; echo "W4 $b $i: exit $?"
    grep median $OUT/w4_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
  done
done
echo "ncu, new, one W5 Default call: kernel names and durations"
timeout 90 ncu --clock-control none --metrics gpu__time_duration.sum --launch-skip 60 --launch-count 45 /tmp/new/bench_gpu_train --benchmark_filter="W5/f32/Default" --benchmark_repetitions=1 --benchmark_min_time=0.01 > $OUT/ncu_w5.txt 2>&1; echo "ncu: exit $?"
grep -E "^  [a-zA-Z_].*\(|duration" $OUT/ncu_w5.txt | paste - - | awk '{print substr($1,1,60), $(NF)}' | head -50
cd $OUT && tar czf /tmp/out.tgz . && rm -rf $OUT/* && mv /tmp/out.tgz $OUT/out.tgz
