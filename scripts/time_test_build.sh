#!/usr/bin/env bash
# The test build exactly as scripts/test.sh configures it (-j2), timed: each compiler call goes
# through a launcher that logs its wall seconds, so the figures are those of a parallel build
# (two jobs share the two cores), not of one unit alone (scripts/build_times.sh). Prints the
# build's wall time, the sum of compile seconds by kind (host code of the CUDA tests, nvcc,
# the rest) and the slowest units. Usage: scripts/time_test_build.sh [build-dir]  (a fresh one)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-time-tests}
rm -rf "$build"
mkdir -p "$build"
log=$(realpath "$build")/compile_times.log
launcher=$(realpath "$build")/time_launcher.sh
cat > "$launcher" <<SH
#!/usr/bin/env bash
s=\$(date +%s.%N); "\$@"; rc=\$?; e=\$(date +%s.%N)
out=""; prev=""; for a in "\$@"; do [ "\$prev" = "-o" ] && out="\$a"; prev="\$a"; done
echo "\$(echo "\$e - \$s" | bc) \$(basename "\$1") \$out" >> "$log"
exit \$rc
SH
chmod +x "$launcher"
start=$(date +%s)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON -DKILN_BUILD_EXAMPLES=ON \
  -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher" -DCMAKE_CUDA_COMPILER_LAUNCHER="$launcher" > /dev/null
cmake --build "$build" -j2 > "$build/build.log"
echo "build wall time: $(( $(date +%s) - start )) s"
awk '{ if ($2 == "nvcc") k = "nvcc (CUDA kernels, cuda_ops.cu)"; else if ($3 ~ /cuda|gpu_/) k = "g++, CUDA tests and examples (host code)"; else k = "g++, the rest";
       s[k] += $1; n[k]++ } END { for (k in s) printf "%-45s %4d units %7.0f s\n", k, n[k], s[k] }' "$log"
echo "slowest units:"
sort -rn "$log" | head -15 | awk '{ printf "  %6.1f s  %s %s\n", $1, $2, $3 }'
