#!/usr/bin/env bash
# Compile time and peak compiler memory of every test, example and benchmark translation unit,
# one at a time (so the figures do not disturb each other), as a markdown table sorted by
# time. Usage: scripts/build_times.sh [build-dir]   (configures one if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-times}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON -DKILN_BUILD_EXAMPLES=ON \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > /dev/null
python3 - "$build" <<'PY'
import json, os, re, shlex, subprocess, sys
build = sys.argv[1]
rows = []
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    src = os.path.relpath(e["file"])
    if src.endswith("test_main.cpp"):
        continue
    cmd = shlex.split(e["command"])
    out = cmd.index("-o")
    cmd[out + 1] = "/dev/null"
    r = subprocess.run(["/usr/bin/time", "-v"] + cmd, cwd=e["directory"], capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", r.stderr)
    secs = float(wall.group(3)) + 60 * float(wall.group(2)) + 3600 * float(wall.group(1) or 0)
    mem = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", r.stderr).group(1)) / 1024
    rows.append((secs, mem, src))
rows.sort(reverse=True)
print("| translation unit | compile time (s) | peak memory (MiB) |")
print("|---|---|---|")
for s, m, f in rows:
    print(f"| {f} | {s:.1f} | {m:.0f} |")
print(f"\nworst: {rows[0][2]}, {rows[0][0]:.1f} s; most memory: {max(r[1] for r in rows):.0f} MiB")
PY
