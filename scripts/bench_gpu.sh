#!/usr/bin/env bash
# kiln's GPU benchmarks on a machine with a CUDA GPU (docs/benchmarks-gpu.md).
#
#   bash scripts/bench_gpu.sh [build-dir]     (default build-gpu)
#
# With no options: builds bench_gpu (the copy ceiling, W1-W4, SoftmaxLong) and bench_gpu_train
# (W5), runs them and the PyTorch peer (bench/peers/torch_workloads.py) back to back and writes
# the comparison to docs/benchmarks-gpu.md. Logs and JSON go to $OUT (default <build-dir>/out).
#
# Environment:
#   KILN_GPU_BIN=dir        use the bench_gpu and bench_gpu_train binaries in dir instead of
#                           building them (built elsewhere: configure with -DKILN_NATIVE=OFF
#                           and copy the libbenchmark.so.1 they link against into dir too)
#   KILN_BENCH_FILTER=re    run only kiln's cases whose name matches the regular expression
#                           (e.g. '^W4/B1/'), 3 repetitions, and print their medians; nothing
#                           is written to docs/
#   KILN_BENCH_AB=dir       with KILN_BENCH_FILTER: an A/B comparison of the binaries in dir
#                           (A) with the ones built or named by KILN_GPU_BIN (B): A, B, A, B,
#                           each run with 5 repetitions, medians printed
#   KILN_BENCH_PARTS        "kiln", "torch" or "kiln torch" (default): run one side alone, for
#                           machines that limit one command's time ("torch" reads the kiln.json
#                           an earlier "kiln" run left in $OUT)
#   TORCH_MODES             PyTorch's modes (default eager,compile,reduce-overhead; add
#                           max-autotune at the cost of minutes of tuning)
#   KILN_CACHE_DIR          MaxAutotune's cache; by default a fresh one, so it tunes in the run
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$BUILD/out}
PARTS=${KILN_BENCH_PARTS:-kiln torch}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
if [ -z "${KILN_GPU_BIN:-}" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_CUDA=ON -DKILN_BUILD_BENCHMARKS=ON \
    -DKILN_BUILD_EXAMPLES=OFF > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target bench_gpu bench_gpu_train > "$OUT/build-bench.log" 2>&1 \
    || { grep -E "error" -A5 "$OUT/build-bench.log" | head -60; exit 1; }
  KILN_GPU_BIN=$BUILD/bench
fi
KILN_GPU_BIN=$(realpath "$KILN_GPU_BIN")
export LD_LIBRARY_PATH=$KILN_GPU_BIN${KILN_BENCH_AB:+:$(realpath "$KILN_BENCH_AB")}:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}

medians() { grep "_median" | awk '{print $1, $2, $3, $NF}' | cut -c1-160; }

if [ -n "${KILN_BENCH_FILTER:-}" ]; then
  if [ -n "${KILN_BENCH_AB:-}" ]; then
    for round in 1 2; do
      for dir in "$(realpath "$KILN_BENCH_AB")" "$KILN_GPU_BIN"; do
        for b in bench_gpu bench_gpu_train; do
          [ -x "$dir/$b" ] || continue
          echo "== $dir/$b, round $round"
          timeout 300 "$dir/$b" --benchmark_filter="$KILN_BENCH_FILTER" --benchmark_min_time=0.05 \
            --benchmark_repetitions=5 --benchmark_report_aggregates_only=true 2>&1 | medians
        done
      done
    done
  else
    for b in bench_gpu bench_gpu_train; do
      timeout 300 "$KILN_GPU_BIN/$b" --benchmark_filter="$KILN_BENCH_FILTER" --benchmark_min_time=0.05 \
        --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>&1 | medians
    done
  fi
  exit 0
fi

if [[ $PARTS == *kiln* ]]; then
  common="--benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.05"
  for b in bench_gpu bench_gpu_train; do
    # Run from the binaries' folder so that the JSON's context names the executable, not a path.
    (cd "$KILN_GPU_BIN" && timeout 280 "./$b" $common --benchmark_out="$OUT/$b.json" \
      --benchmark_out_format=json) > "$OUT/$b.txt" 2>&1
    echo "$b: exit $?"
    grep "median" "$OUT/$b.txt" | awk '{print $1, $2, $3, $7, $8, $9}'
  done
  python3 - "$OUT/bench_gpu.json" "$OUT/bench_gpu_train.json" "$OUT/kiln.json" <<'PY'
import json, sys
runs = []
for path in sys.argv[1:3]:
    try:
        runs.append(json.load(open(path)))
    except Exception as e:
        print("no", path, e)
if runs:
    merged = runs[0]
    for r in runs[1:]:
        merged["benchmarks"] += r["benchmarks"]
    json.dump(merged, open(sys.argv[3], "w"), indent=1)
PY
fi
[[ $PARTS == *torch* ]] || exit 0
PYTHONUNBUFFERED=1 timeout 260 python3 bench/peers/torch_workloads.py --workloads W1,W2,W3,W4,W5 --dtypes f32,bf16 \
  --modes "${TORCH_MODES:-eager,compile,reduce-overhead}" --json "$OUT/torch.json" > "$OUT/torch.txt" 2> "$OUT/torch.err"
echo "torch: exit $?"
python3 bench/report_gpu.py --kiln "$OUT/kiln.json" --torch "$OUT/torch.json" --write docs/benchmarks-gpu.md
cp docs/benchmarks-gpu.md "$OUT/"
