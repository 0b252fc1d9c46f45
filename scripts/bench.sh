#!/usr/bin/env bash
# Builds and runs the Google Benchmark suite, then writes the tables and charts of
# docs/benchmarks.md and the charts in docs/benchmarks/.
# Usage: scripts/bench.sh [extra benchmark flags]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
# The report's charts, and PyTorch as W5's peer (Debian's CPU build).
for pkg in python3-matplotlib python3-torch; do
  dpkg-query -W -f='${Status}' $pkg 2>/dev/null | grep -q "install ok installed" || {
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $pkg
  }
done
cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF -DKILN_BUILD_BENCHMARKS=ON
cmake --build build-bench -j2
out=build-bench/results
mkdir -p "$out"
for b in bench_pointwise bench_rows bench_gemm bench_train; do
  "build-bench/bench/$b" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_min_time=0.5 --benchmark_out="$out/$b.json" --benchmark_out_format=json "$@"
done
/usr/bin/python3 bench/peers/torch_cpu.py "$out/torch_cpu.json"
/usr/bin/python3 bench/report.py docs "$out"/*.json
