#!/usr/bin/env bash
# Installs what kiln needs from Debian's packages, if anything is missing. Idempotent and
# quick when everything is there. Needs root (or sudo) only when something must be installed.
set -euo pipefail
# libpng: examples/classify_image; python3-matplotlib: scripts/plot_loss.py (train_gpt's loss.png)
packages=(cmake g++ make libeigen3-dev doctest-dev libbenchmark-dev nlohmann-json3-dev libpng-dev python3-matplotlib)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all present (${packages[*]})"
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
