#!/usr/bin/env bash
# The long fuzzing searches: each libFuzzer target of tests/fuzz/ runs RUNS executions in all
# (default 10 million), split over JOBS processes (default: every core), from a copy of its
# committed corpus, the readers' one-line warnings silenced (-close_fd_mask=2). A crash, a
# sanitizer report or a leak is saved as <build>/fuzz-out/<target>/crash-* (or leak-*, oom-*,
# timeout-*): minimise it with `<target> -minimize_crash=1 <file>`, fix the reader, and add the
# input to tests/fuzz/corpus/<target>/, where ctest replays it. Prints the executions run and
# the findings per target; exits 1 if any.
#   bash scripts/fuzz.sh [build dir]           builds the targets (clang++ with libFuzzer) first
#   FUZZ_BIN=<dir> bash scripts/fuzz.sh        runs targets built elsewhere (fuzz_* in <dir>)
#   TARGETS="safetensors" ...                   one target (default: all)
#   SECONDS_MAX=<s> ...                         each job stops after <s> seconds too
#   FUZZ_TMP=<dir> ...                          where the targets write their files (default:
#                                               the run's folder; a tmpfs such as /dev/shm is faster)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-tests}
RUNS=${RUNS:-10000000}
JOBS=${JOBS:-$(nproc)}
if [ -z "${FUZZ_BIN:-}" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON > /dev/null || exit 1
  cmake --build "$BUILD" --target fuzz_safetensors fuzz_autotune_cache fuzz_config fuzz_tokenizer > /dev/null || exit 1
  FUZZ_BIN=$BUILD/tests
fi
FUZZ_BIN=$(cd "$FUZZ_BIN" && pwd)
status=0
for f in ${TARGETS:-safetensors autotune_cache config tokenizer}; do
  work="$BUILD/fuzz-out/$f"
  rm -rf "$work" && mkdir -p "$work/corpus" "$work/tmp"
  cp tests/fuzz/corpus/$f/* "$work/corpus/"
  per=$(( (RUNS + JOBS - 1) / JOBS ))
  start=$(date +%s)
  tmp=${FUZZ_TMP:-$(cd "$work" && pwd)/tmp}
  (cd "$work" && TMPDIR="$tmp" "$FUZZ_BIN/fuzz_$f" -jobs="$JOBS" -workers="$JOBS" -runs="$per" -max_len=4096 \
     ${SECONDS_MAX:+-max_total_time=$SECONDS_MAX} -close_fd_mask=2 corpus > fuzz.log 2>&1)
  runs=$(cat "$work"/fuzz-*.log 2>/dev/null | sed -n 's/^Done \([0-9]*\) runs.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
  findings=$(ls "$work" | grep -cE '^(crash|leak|oom|timeout)-')
  echo "fuzz_$f: ${runs:-0} executions on $JOBS processes in $(( $(date +%s) - start )) s, $findings findings," \
       "corpus $(ls tests/fuzz/corpus/$f | wc -l) -> $(ls "$work/corpus" | wc -l) inputs"
  [ "$findings" -eq 0 ] && [ "${runs:-0}" -ge "$RUNS" ] || status=1
done
exit "$status"
