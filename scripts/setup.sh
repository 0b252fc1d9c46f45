#!/usr/bin/env bash
# Set-up: install missing dependencies, fetch the data, build the examples, train the digits
# classifier (examples/train_digits.cpp, seconds), then a character-level GPT on Debian's fortune
# cookies (examples/train_gpt.cpp, about 10 minutes on two cores) that ends by writing samples,
# and its loss curve, train_gpt_output/loss.png.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/fetch_digits.sh
bash scripts/fetch_fortunes.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DKILN_BUILD_TESTS=OFF -DKILN_BUILD_EXAMPLES=ON
cmake --build build -j2 --target train_digits quickstart train_gpt
./build/examples/train_digits data/digits.csv
./build/examples/train_gpt data/fortunes.txt
/usr/bin/python3 scripts/plot_loss.py train_gpt_output/loss.png train_gpt_output/trainer_log.jsonl
