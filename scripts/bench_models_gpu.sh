#!/usr/bin/env bash
# kiln's models against PyTorch on a machine with a CUDA GPU: W6 (ViT-B/16) and W7 (GPT-2 small
# decode, and its prefill), docs/benchmarks.md's workloads.
#
#   bash scripts/bench_models_gpu.sh [build-dir]     (default build-gpu)
#
# Builds bench_models_gpu (unless KILN_GPU_BIN names a folder holding it), runs it (3
# repetitions, medians; it writes the random-weight checkpoints to the temporary directory at
# its first run), then bench/peers/torch_models.py on the same checkpoints, and writes the
# comparison into docs/benchmarks-gpu.md (between its "models" markers) and the chart
# docs/benchmarks/gpu/models.svg with bench/report_models.py. Logs and JSON go to $OUT
# (default <build-dir>/out).
#
# Environment:
#   KILN_GPU_BIN=dir      a prebuilt bench_models_gpu (configure with -DKILN_NATIVE=OFF, and put
#                         the libbenchmark.so it links against beside it)
#   KILN_BENCH_FILTER=re  kiln's cases to run (default all); the page is then not rewritten
#   TORCH_MODES           W6's and W7prefill's modes (default eager,compile,reduce-overhead;
#                         max-autotune adds minutes of tuning)
#   TORCH_DTYPES          W6's element types for PyTorch (default f32,bf16)
#   KILN_BENCH_PARTS      "kiln", "torch" or "kiln torch" (default): one side alone, for
#                         machines that limit one command's time ("torch" reports with the
#                         kiln_models.json an earlier "kiln" run left in $OUT)
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build-gpu}
OUT=${OUT:-$BUILD/out}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
device=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
if [ -z "${KILN_GPU_BIN:-}" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DKILN_ENABLE_CUDA=ON -DKILN_BUILD_BENCHMARKS=ON \
    -DKILN_BUILD_EXAMPLES=OFF > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build "$BUILD" -j"$(nproc)" --target bench_models_gpu > "$OUT/build-models.log" 2>&1 \
    || { grep -E "error" -A5 "$OUT/build-models.log" | head -60; exit 1; }
  KILN_GPU_BIN=$BUILD/bench
fi
KILN_GPU_BIN=$(realpath "$KILN_GPU_BIN")
PARTS=${KILN_BENCH_PARTS:-kiln torch}
export LD_LIBRARY_PATH=$KILN_GPU_BIN:${LD_LIBRARY_PATH:-}
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-$(mktemp -d)}
if [[ $PARTS == *kiln* ]]; then
  (cd "$KILN_GPU_BIN" && ./bench_models_gpu --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_filter="${KILN_BENCH_FILTER:-.}" --benchmark_out="$OUT/kiln_models.json" \
    --benchmark_out_format=json) > "$OUT/kiln_models.txt" 2>&1
  echo "bench_models_gpu: exit $?"
  grep "median" "$OUT/kiln_models.txt" | cut -c1-200
fi
[[ $PARTS == *torch* ]] || exit 0
PYTHONUNBUFFERED=1 python3 bench/peers/torch_models.py --modes "${TORCH_MODES:-eager,compile,reduce-overhead}" \
  --dtypes "${TORCH_DTYPES:-f32,bf16}" --json "$OUT/torch_models.json" 2>&1 | grep -v Warning | tee "$OUT/torch_models.txt"
if [ -n "${KILN_BENCH_FILTER:-}" ]; then
  python3 bench/report_models.py --kiln "$OUT/kiln_models.json" --torch "$OUT/torch_models.json" --device "$device"
else
  python3 bench/report_models.py --kiln "$OUT/kiln_models.json" --torch "$OUT/torch_models.json" --device "$device" \
    --write docs/benchmarks-gpu.md --svg docs/benchmarks/gpu/models.svg
  cp "$OUT/kiln_models.json" "$OUT/torch_models.json" docs/benchmarks/gpu/
fi
