#!/usr/bin/env bash
# Fourteenth session, one device call: every CUDA test and the quickstart; memcheck on the
# pointwise suites (their gradients are new) and on the cuBLASLt epilogues (GELU_BIAS is new);
# MaxAutotune's choices with the 5% margin (explain notes); then the full scripts/bench_gpu.sh
# run (kiln, the same-size copies, PyTorch). Binaries from .gpu-bin/bins.tgz.
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_cuda_ops test_cuda_modes test_cuda_training test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
  timeout 120 /tmp/bins/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -40
done
timeout 30 /tmp/bins/gpu_quickstart 2>&1 | tail -2
timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_pointwise > $OUT/memcheck_pointwise.txt 2>&1; echo "memcheck test_cuda_pointwise: exit $?"; tail -1 $OUT/memcheck_pointwise.txt
timeout 60 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_dtypes -tc='cuBLASLt*' > $OUT/memcheck_lt.txt 2>&1; echo "memcheck test_cuda_dtypes cuBLASLt epilogues: exit $?"; tail -1 $OUT/memcheck_lt.txt
export KILN_CACHE_DIR=$(mktemp -d)
KILN_BENCH_EXPLAIN=1 timeout 120 /tmp/bins/bench_gpu --benchmark_filter='^(W1/(f32|bf16)|W2/bf16|W3/bf16|W4/B(1|4096)/bf16)/MaxAutotune/' --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ma.txt 2> $OUT/ma_explain.txt; echo "MaxAutotune: exit $?"
grep median $OUT/ma.txt | awk '{print $1, $2, $3}'
grep -E "autotune: chose" $OUT/ma_explain.txt | cut -c1-700
mkdir -p $OUT/bench
KILN_GPU_BIN=/tmp/bins OUT=$OUT/bench timeout 420 bash scripts/bench_gpu.sh > $OUT/bench.txt 2>&1; echo "bench_gpu.sh: exit $?"
grep -E "^W|^Copy|torch|exit" $OUT/bench.txt | head -90
rm -f $OUT/bench/kiln.json
cd $OUT && tar czf /tmp/out.tgz . && rm -rf $OUT/* && mv /tmp/out.tgz $OUT/out.tgz
