#!/usr/bin/env bash
# Fourteenth session, second call: test_cuda_modes with the plan suites' cases that run kernels
# (plan_cases.hpp), under memcheck too, and the quickstart. Binaries from .gpu-bin/bins2.tgz.
set -u
mkdir -p /tmp/bins && tar xzf .gpu-bin/bins2.tgz -C /tmp/bins
export LD_LIBRARY_PATH=/tmp/bins:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
timeout 120 /tmp/bins/test_cuda_modes > $OUT/test_cuda_modes.log 2>&1; rc=$?
echo "test_cuda_modes: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/test_cuda_modes.log | tr '\n' ' ')"
[ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/test_cuda_modes.log | head -40
timeout 150 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/bins/test_cuda_modes -tc='plan*,multiple outputs*' > $OUT/memcheck_modes.txt 2>&1; echo "memcheck test_cuda_modes (plan and merged-output cases): exit $?"; tail -n1 $OUT/memcheck_modes.txt
timeout 30 /tmp/bins/gpu_quickstart 2>&1 | tail -3
