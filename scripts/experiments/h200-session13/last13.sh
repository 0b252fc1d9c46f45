#!/usr/bin/env bash
# Thirteenth session, last change (the flat kernel for 16-byte units only): the two test
# executables whose kernels it changes, and memcheck on the many-spans case.
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_cuda_pointwise test_cuda_dtypes; do
  timeout 100 /tmp/bins/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -30
done
timeout 100 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_dtypes -tc='*many spans*' > $OUT/memcheck_spans.txt 2>&1; echo "memcheck dtypes many spans: exit $?"; tail -1 $OUT/memcheck_spans.txt
