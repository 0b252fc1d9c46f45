#!/usr/bin/env bash
# On a machine with a CUDA GPU and PyTorch: kiln's GPU benchmarks (bench_gpu: the copy ceiling
# and W1-W4; bench_gpu_train: W5) and the PyTorch peer (bench/peers/torch_workloads.py) in one
# run, then one table of ratios in docs/benchmarks-gpu.md. Builds the benchmarks unless
# KILN_GPU_BIN names a folder of prebuilt ones. Usage: bash scripts/bench_gpu.sh [build dir];
# TORCH_MODES overrides the peer's modes (default eager,compile,reduce-overhead).
# KILN_BENCH_PARTS (default "kiln torch") runs a part alone, for machines that limit one call's
# time: "kiln" writes $OUT/kiln.json; "torch" runs the peer and writes the table from the
# kiln.json already in $OUT (from an earlier "kiln" run).
set -uo pipefail
PARTS=${KILN_BENCH_PARTS:-kiln torch}
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$BUILD/out}
mkdir -p "$OUT"
if [ -z "${KILN_GPU_BIN:-}" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_CUDA=ON -DKILN_BUILD_BENCHMARKS=ON -DKILN_BUILD_EXAMPLES=OFF > "$OUT/configure.log" 2>&1
  cmake --build "$BUILD" -j"$(nproc)" --target bench_gpu bench_gpu_train > "$OUT/build-bench.log" 2>&1 || exit 1
  KILN_GPU_BIN=$BUILD/bench
fi
if [[ $PARTS == *kiln* ]]; then
  common="--benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_min_time=0.05"
  export KILN_CACHE_DIR=$(mktemp -d)  # MaxAutotune tunes in this run
  for b in bench_gpu bench_gpu_train; do
    timeout 280 "$KILN_GPU_BIN/$b" $common --benchmark_out="$OUT/$b.json" --benchmark_out_format=json > "$OUT/$b.txt" 2>&1
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
