#!/usr/bin/env bash
# The differential fuzzer's sweep (tests/fuzz/differential_graphs.cpp): BATCHES executables of
# PROGRAMS random graphs each (default 64 x 8 = 512 graphs, from program 1000 on), built with
# JOBS at a time (default: every core; a compile of 8 graphs takes about 3 GB), each built and
# then run. Every graph is compiled in every mode and backend and compared with a float64
# reference, its gradient with finite differences. Prints each executable's summary, the
# mismatching graphs with their expressions, and the totals; then minimises each failing graph
# and saves it as a regression test (tests/fuzz/regressions.inc). Exits 1 on any mismatch.
#   bash scripts/fuzz_graphs.sh [build dir]        default build dir: build-fuzz
#   BATCHES=<n> PROGRAMS=<n> JOBS=<n> FIRST=<program> ...
#   GPU=1 ...                                      run the graphs on the GPU (a CUDA build)
# A graph costs about 6 s of one core to compile, so 10,000 graphs are about 17 core-hours.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-fuzz}
BATCHES=${BATCHES:-64}
PROGRAMS=${PROGRAMS:-8}
FIRST=${FIRST:-1000}
JOBS=${JOBS:-$(nproc)}
cuda=OFF
[ "${GPU:-0}" = 1 ] && cuda=ON
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON -DKILN_BUILD_EXAMPLES=OFF \
  -DKILN_ENABLE_CUDA=$cuda -DKILN_FUZZ_SWEEP="$BATCHES" -DKILN_FUZZ_SWEEP_PROGRAMS="$PROGRAMS" -DKILN_FUZZ_SWEEP_FIRST="$FIRST" -DKILN_FUZZ_GPU=$cuda -DKILN_FUZZ_MINIMISE= \
  > /dev/null || exit 1
mkdir -p "$BUILD/fuzz_graphs"
rm -f "$BUILD"/fuzz_graphs/*.log
flag=""
[ "$cuda" = ON ] && flag=--gpu
# Each worker builds one executable and runs it, so a sweep stopped early still leaves the logs
# of the batches it finished (make's /fast targets skip the shared dependency scan, which
# concurrent makes must not run). A CUDA build is built first, as a whole.
start=$(date +%s)
build="make -s -C '$BUILD' differential_sweep_{}/fast"
if [ "$cuda" = ON ]; then
  # shellcheck disable=SC2046
  cmake --build "$BUILD" -j "$JOBS" --target $(seq 0 $((BATCHES - 1)) | sed 's/^/differential_sweep_/') \
    > "$BUILD/fuzz_graphs/build.log" 2>&1 || { tail -40 "$BUILD/fuzz_graphs/build.log"; exit 1; }
  build=true
fi
seq 0 $((BATCHES - 1)) | xargs -P "$JOBS" -I{} sh -c \
  "$build > '$BUILD/fuzz_graphs/{}.build' 2>&1 || { echo 'executable {}: build failed'; tail -20 '$BUILD/fuzz_graphs/{}.build'; } > '$BUILD/fuzz_graphs/{}.log';
   [ -s '$BUILD/fuzz_graphs/{}.log' ] || '$BUILD/tests/differential_sweep_{}' $flag > '$BUILD/fuzz_graphs/{}.log' 2>&1"
echo "built and ran $BATCHES executables of $PROGRAMS graphs in $(( $(date +%s) - start )) s on $JOBS jobs"
cat "$BUILD"/fuzz_graphs/*.log
awk '/^differential:/ { for (i = 1; i <= NF; ++i) { if ($(i+1) ~ /^graphs,/) g += $i; if ($(i+1) == "runs,") r += $i;
       if ($(i+1) == "values,") v += $i; if ($(i+1) == "mismatches") m += $i } n++ }
     /build failed/ { f++ }
     END { printf "total: %d executables, %d graphs, %d runs, %d values compared, %d mismatches, %d failed builds\n", n, g, r, v, m, f;
           exit (m > 0 || f > 0 || n == 0) }' "$BUILD"/fuzz_graphs/*.log
status=$?

# Minimise the failing programs (the first 8): each subtree of the graph checked alone, the
# smallest that fails appended to tests/fuzz/regressions.inc, where CI checks it from then on.
failed=$(sed -n 's/^MISMATCH in program \([0-9]*\).*/\1/p' "$BUILD"/fuzz_graphs/*.log | sort -un | head -8)
if [ -n "$failed" ]; then
  cmake -S . -B "$BUILD" -DKILN_FUZZ_MINIMISE="$(echo $failed | tr ' ' ';')" > /dev/null || exit 1
  for p in $failed; do
    cmake --build "$BUILD" -j "$JOBS" --target differential_minimise_$p > "$BUILD/fuzz_graphs/minimise_$p.build" 2>&1 ||
      { tail -20 "$BUILD/fuzz_graphs/minimise_$p.build"; continue; }
    "$BUILD/tests/differential_minimise_$p" $flag | tee "$BUILD/fuzz_graphs/minimise_$p.txt" | grep -v '^  '
    line=$(sed -n 's/^regression: //p' "$BUILD/fuzz_graphs/minimise_$p.txt")
    if [ -n "$line" ] && ! grep -qxF "$line" tests/fuzz/regressions.inc; then
      echo "$line" >> tests/fuzz/regressions.inc
      echo "added to tests/fuzz/regressions.inc: $line"
    fi
  done
fi
exit $status
