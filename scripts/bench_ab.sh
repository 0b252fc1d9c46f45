#!/usr/bin/env bash
# Before/after: the CPU benchmarks of git revision REF (A) and of this tree (B), built alike and
# run alternately on the same machine (A, B, A, B, ...), so that both see the same load and clock.
# Prints one Markdown row per benchmark: the median real time of A and of B over all their
# repetitions, and B/A (below 1 is faster).
#
#   bash scripts/bench_ab.sh REF [REGEX] [ROUNDS]
#
# REF      any git revision (a worktree of it is made under build-ab/)
# REGEX    Google Benchmark filter (default: every benchmark)
# ROUNDS   alternations (default 3; each runs every benchmark with 3 repetitions)
# BENCHES  the binaries to run (default "bench_pointwise bench_rows bench_gemm bench_train")
set -euo pipefail
cd "$(dirname "$0")/.."
ref=${1:?usage: scripts/bench_ab.sh REF [REGEX] [ROUNDS]}
filter=${2:-.}
rounds=${3:-3}
benches=${BENCHES:-bench_pointwise bench_rows bench_gemm bench_train}
sha=$(git rev-parse --short "$ref")
root=$PWD
a=$root/build-ab/$sha
[ -d "$a/src" ] || git worktree add --detach "$a/src" "$sha" > /dev/null
configure() {  # source dir, build dir
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=OFF \
    -DKILN_BUILD_BENCHMARKS=ON -DKILN_ENABLE_CUDA=OFF > /dev/null
  cmake --build "$2" -j2 --target $benches > /dev/null
}
configure "$a/src" "$a/build"
configure "$root" "$root/build-ab/head"
out=$root/build-ab/results
rm -rf "$out" && mkdir -p "$out"
for round in $(seq "$rounds"); do
  for side in A B; do
    dir=$a/build; [ $side = B ] && dir=$root/build-ab/head
    for b in $benches; do
      "$dir/bench/$b" --benchmark_filter="$filter" --benchmark_repetitions=3 --benchmark_min_time=0.2 \
        --benchmark_out="$out/$side.$round.$b.json" --benchmark_out_format=json > /dev/null
    done
  done
done
python3 - "$out" "$sha" <<'PY'
import glob, json, statistics, sys
out, sha = sys.argv[1:3]
times = {}
for path in glob.glob(f"{out}/*.json"):
    side = path.rsplit("/", 1)[1].split(".")[0]
    for b in json.load(open(path))["benchmarks"]:
        if b.get("run_type") == "iteration":
            scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
            times.setdefault(b["run_name"], {}).setdefault(side, []).append(b["real_time"] * scale)
print(f"| benchmark | {sha} (ms) | this tree (ms) | ratio |")
print("|---|---:|---:|---:|")
for name, t in times.items():
    if "A" in t and "B" in t:
        ma, mb = statistics.median(t["A"]), statistics.median(t["B"])
        print(f"| {name} | {ma:.4g} | {mb:.4g} | {mb / ma:.3f} |")
PY
