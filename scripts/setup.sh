#!/usr/bin/env bash
# Set-up: install missing dependencies, build the examples, run the quickstart.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON
cmake --build build -j2 --target quickstart
./build/examples/quickstart
