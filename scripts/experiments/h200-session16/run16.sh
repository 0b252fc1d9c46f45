#!/usr/bin/env bash
# The CUDA tests as CI built them here (fresh clone of b07af01), run on the H200.
set -u
mkdir -p /tmp/b && tar xzf .gpu-bin/tests16.tgz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in test_cuda_ops test_cuda_modes test_cuda_training test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
  timeout 100 /tmp/b/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A8 "ERROR" $OUT/$t.log | head -30
done
# the same binary again: the MaxAutotune case now tunes in a fresh cache each run
timeout 60 /tmp/b/test_cuda_modes -tc="MaxAutotune*" 2>&1 | grep -E "test cases|ERROR"
timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/b/test_cuda_modes > $OUT/memcheck_modes.log 2>&1
echo "memcheck test_cuda_modes: exit $?; $(grep 'test cases' $OUT/memcheck_modes.log); $(tail -1 $OUT/memcheck_modes.log)"
