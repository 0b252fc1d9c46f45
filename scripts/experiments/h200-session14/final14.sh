#!/usr/bin/env bash
# Fourteenth session, last call: GEMM epilogues with a bias run as the flat kernel that reads the
# bias at each unit's column (pointwise kernel 2). Old = 3a9a47b's binaries (.gpu-bin/bins.tgz),
# new = this change's (.gpu-bin/bins4.tgz). Every CUDA test, memcheck on the new kernel's cases,
# old and new bench_gpu alternating on W1 and W4, ncu's kernel durations of one W4 B=4096 bf16
# call (new; the old one's are in split14.sh's output), then the full scripts/bench_gpu.sh run on the new binaries.
set -u
mkdir -p /tmp/old /tmp/new && tar xzf .gpu-bin/bins.tgz -C /tmp/old && tar xzf .gpu-bin/bins4.tgz -C /tmp/new
cp /tmp/old/libbenchmark.so.1debian /tmp/new/
export LD_LIBRARY_PATH=/tmp/new:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
for t in test_cuda_ops test_cuda_modes test_cuda_training test_cuda_host_tu test_cuda_dtypes test_cuda_pointwise test_cuda_ops_suites test_cuda_reduce; do
  timeout 120 /tmp/new/$t > $OUT/$t.log 2>&1; rc=$?
  echo "$t: exit $rc; $(grep -E '^\[doctest\] (test cases|assertions)' $OUT/$t.log | tr '\n' ' ')"
  [ $rc -eq 0 ] || grep -B2 -A12 "ERROR\|FATAL\|terminate" $OUT/$t.log | head -30
done
timeout 30 /tmp/new/gpu_quickstart 2>&1 | tail -1
timeout 90 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 /tmp/new/test_cuda_dtypes -tc='GEMM epilogues*,MaxAutotune*' > $OUT/memcheck_rows.txt 2>&1; echo "memcheck GEMM epilogue cases: exit $?"; tail -n1 $OUT/memcheck_rows.txt
F='^(Copy/f32|W1/(f32|bf16)/Default|W4/B4096/(f32|bf16)/(Default|ReduceOverhead))/'
for i in 1 2; do
  for b in old new; do
    timeout 90 /tmp/$b/bench_gpu --benchmark_filter="$F" --benchmark_repetitions=3 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true > $OUT/ab_${b}_$i.txt 2>&1; echo "$b $i: exit $?"
    grep median $OUT/ab_${b}_$i.txt | awk '{printf "%s %s | ", $1, $2} END {print ""}' | sed 's|/manual_time_median||g'
  done
done
for b in new; do
  echo "ncu $b W4 B=4096 bf16 Default, one call:"
  timeout 60 ncu --clock-control none --metrics gpu__time_duration.sum,launch__registers_per_thread --launch-skip 12 --launch-count 4 /tmp/$b/bench_gpu --benchmark_filter="^W4/B4096/bf16/Default/" --benchmark_repetitions=1 --benchmark_min_time=0.01 2>&1 | grep -E "^  [a-zA-Z_].*\(|duration|registers" | grep -v "L[123] " | cut -c1-150
done
mkdir -p $OUT/bench
KILN_GPU_BIN=/tmp/new OUT=$OUT/bench timeout 330 bash scripts/bench_gpu.sh > $OUT/bench.txt 2>&1; echo "bench_gpu.sh: exit $?"
grep -E "^W4/B4096|^W1|^Copy/f32|torch" $OUT/bench.txt | head -30
rm -f $OUT/bench/kiln.json
cd $OUT && tar czf /tmp/out.tgz . && rm -rf $OUT/* && mv /tmp/out.tgz $OUT/out.tgz
