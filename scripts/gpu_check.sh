#!/usr/bin/env bash
# On a machine with a CUDA GPU: builds the CUDA tests (unless KILN_GPU_BIN names a folder of
# prebuilt ones), runs their GPU cases (--on-gpu, tests/test_main.cpp), then compute-sanitizer:
# memcheck on test_cuda_ops, test_cuda_modes, test_dtypes, test_ops and test_reductions;
# racecheck on the row-reduction cases, the tensor-core GEMM kernels and attention (shared memory);
# initcheck (reads of device memory nothing wrote) and synccheck on test_ops. Logs
# go to ${OUT:-<build dir>/out}. Usage: bash scripts/gpu_check.sh [build dir]
# KILN_SANITIZE=0 skips the sanitizers; KILN_SANITIZE=only runs just them.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$BUILD/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
# Every executable with GPU cases: those of GPU cases alone (test_cuda_*) and those that run
# their shared cases on both devices.
tests="test_cuda_ops test_cuda_modes test_cuda_training test_cuda_host_tu test_dtypes test_pointwise test_ops test_reductions"
if [ -z "${KILN_GPU_BIN:-}" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_CUDA=ON -DKILN_BUILD_BENCHMARKS=ON \
    -DKILN_BUILD_EXAMPLES=OFF > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target $tests > "$OUT/build.log" 2>&1 || { grep -E "error" -A5 "$OUT/build.log" | head -60; exit 1; }
  KILN_GPU_BIN=$BUILD/tests
fi
status=0
[ "${KILN_SANITIZE:-1}" = only ] && tests=""
for t in $tests; do
  timeout 300 "$KILN_GPU_BIN/$t" --on-gpu > "$OUT/$t.log" 2>&1
  rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/$t.log" | tr '\n' ' ')"
  [ $rc -eq 0 ] || { status=1; grep -B2 -A12 "ERROR\|FATAL\|terminate" "$OUT/$t.log" | head -60; }
done
[ "${KILN_SANITIZE:-1}" = 0 ] && for tool in initcheck synccheck; do
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 "$KILN_GPU_BIN/test_ops" --on-gpu > "$OUT/${tool}_test_ops.log" 2>&1
  echo "$tool test_ops: exit $?; $(tail -1 "$OUT/${tool}_test_ops.log")"
done
exit "$status"
for t in test_cuda_ops test_cuda_modes test_dtypes test_ops test_reductions; do
  timeout 150 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$KILN_GPU_BIN/$t" --on-gpu > "$OUT/memcheck_$t.log" 2>&1
  echo "memcheck $t: exit $? ($(grep -c '^========= Invalid\|^========= Program hit' "$OUT/memcheck_$t.log") errors); $(tail -1 "$OUT/memcheck_$t.log")"
done
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$KILN_GPU_BIN/test_cuda_ops" --on-gpu -tc="row reductions*" > "$OUT/racecheck.log" 2>&1
echo "racecheck test_cuda_ops (row reductions): exit $?; $(tail -1 "$OUT/racecheck.log")"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$KILN_GPU_BIN/test_cuda_ops" --on-gpu -tc="rows split*" > "$OUT/racecheck_split.log" 2>&1
echo "racecheck test_cuda_ops (rows split over a cluster): exit $?; $(tail -1 "$OUT/racecheck_split.log")"
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$KILN_GPU_BIN/test_ops" --on-gpu \
  -tc="attention against*,attention: masks*,gradients of attention*,attention of head_dim*" > "$OUT/racecheck_attention.log" 2>&1
echo "racecheck test_ops (attention): exit $?; $(tail -1 "$OUT/racecheck_attention.log")"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$KILN_GPU_BIN/test_reductions" --on-gpu > "$OUT/racecheck_reduce.log" 2>&1
echo "racecheck test_reductions: exit $?; $(tail -1 "$OUT/racecheck_reduce.log")"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 "$KILN_GPU_BIN/test_dtypes" --on-gpu -tc="*tensor-core GEMM*" > "$OUT/racecheck_tc.log" 2>&1
echo "racecheck test_dtypes (tensor-core GEMM kernels): exit $?; $(tail -1 "$OUT/racecheck_tc.log")"
exit "$status"
