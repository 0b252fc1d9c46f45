#!/usr/bin/env bash
# Fifteenth session, last call. Old = bins5 (e414cbb's code, test_cuda_modes of c887f57), new =
# bins6: the review's mends of the bias-gradient fold (any refusal falls back, small products
# not folded, the test under ReduceOverhead too) and pointwise kernel 2 issuing a pair of units'
# broadcast (bias) loads before their maths (64 registers, was 56). Every CUDA test, sanitizers
# on the changed cases, old/new alternating on W4 and ncu of W4's gelu pass, then the full
# scripts/bench_gpu.sh run on the new binaries.
set -u
mkdir -p /tmp/old /tmp/new && tar xzf .gpu-bin/bins5.tgz -C /tmp/old && tar xzf .gpu-bin/bins6.tgz -C /tmp/new
for d in old new; do cp .gpu-bin/libbenchmark.so.1.7.1 /tmp/$d/libbenchmark.so.1debian; done
export LD_LIBRARY_PATH=/tmp/new:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=$(mktemp -d)
for t in test_cuda_modes test_cuda_training test_cuda_ops test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
  timeout 150 /tmp/new/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A14 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -40
done
grep -h "BGRADA" $OUT/test_cuda_modes.log | head -3
timeout 30 /tmp/new/gpu_quickstart 2>&1 | tail -1
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_modes -tc='*bias gradient*' > $OUT/${tool}_bgrad.txt 2>&1; echo "$tool bias-gradient cases: exit $?"; tail -n1 $OUT/${tool}_bgrad.txt
done
timeout 120 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_dtypes -tc='GEMM epilogues*' > $OUT/memcheck_epi.txt 2>&1; echo "memcheck GEMM epilogue cases: exit $?"; tail -n1 $OUT/memcheck_epi.txt
F='^(W4/B1/(f32|bf16)/ReduceOverhead|W4/B4096/(f32|bf16)/(Default|ReduceOverhead))/'
for i in 1 2 3; do
  for b in old new; do
    timeout 90 /tmp/$b/bench_gpu --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/w4_${b}_$i.txt 2>&1; echo "W4 $b $i: exit $?"
    grep median $OUT/w4_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
  done
done
for b in old new; do
  echo "ncu $b W4 B=4096 bf16 Default, one call:"
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread --launch-skip 12 --launch-count 4 /tmp/$b/bench_gpu --benchmark_filter="^W4/B4096/bf16/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "^  [a-zA-Z_].*\(|duration|registers" | grep -v "L[123] " | cut -c1-110
done
mkdir -p $OUT/bench
KILN_GPU_BIN=/tmp/new OUT=$OUT/bench timeout 330 bash scripts/bench_gpu.sh > $OUT/bench.txt 2>&1; echo "bench_gpu.sh: exit $?"
grep -E "^W|^Copy/f32|torch|exit" $OUT/bench.txt | head -60
rm -f $OUT/bench/kiln.json
cd $OUT && tar czf /tmp/out.tgz . && rm -rf $OUT/* && mv /tmp/out.tgz $OUT/out.tgz
