#!/usr/bin/env bash
# The whole test suite: install missing dependencies, build every test, run them with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build-tests -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=ON -DKILN_BUILD_EXAMPLES=ON
cmake --build build-tests -j2
ctest --test-dir build-tests -j2 --output-on-failure "$@"
