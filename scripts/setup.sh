#!/usr/bin/env bash
# Set-up: install missing dependencies, fetch the digits data, build the examples, and train
# the digits classifier (examples/train_digits.cpp) with a compiled training step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/fetch_digits.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON
cmake --build build -j2 --target train_digits quickstart
./build/examples/train_digits data/digits.csv
