#!/usr/bin/env bash
# Fifteenth session, second call: test_cuda_modes rebuilt with the bias-gradient case's f32
# tolerance mended (the first call, bgrad15.sh, had every other CUDA test pass, and the W5/W4
# A/B and ncu's list of one W5 step's kernels); the case under memcheck and racecheck.
set -u
mkdir -p /tmp/new && tar xzf .gpu-bin/bins5.tgz -C /tmp/new
cp .gpu-bin/libbenchmark.so.1.7.1 /tmp/new/libbenchmark.so.1debian
export LD_LIBRARY_PATH=/tmp/new:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=$(mktemp -d)
for t in test_cuda_modes test_cuda_training; do
  timeout 150 /tmp/new/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A14 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -40
done
for tool in memcheck racecheck; do
  timeout 150 compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_modes -tc='*bias gradient*,*sum_to*' > $OUT/${tool}_bgrad.txt 2>&1; echo "$tool bias-gradient and sum_to cases: exit $?"; tail -n1 $OUT/${tool}_bgrad.txt
done
