#!/usr/bin/env bash
# Fetches the UCI handwritten digits (1,797 8x8 images, pixel values 0-16, last column the label)
# into data/digits.csv. Debian's python3-sklearn package ships them as
# sklearn/datasets/data/digits.csv.gz: the package is downloaded (not installed) and that one
# file is extracted. Does nothing when data/digits.csv exists.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/digits.csv
if [[ -s $out ]]; then exit 0; fi
mkdir -p data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # apt downloads as the _apt user
(cd "$tmp" && apt-get download python3-sklearn >/dev/null)
dpkg-deb --fsys-tarfile "$tmp"/python3-sklearn_*.deb |
  tar -x -C "$tmp" ./usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
gunzip -c "$tmp"/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz > "$out.part"
mv "$out.part" "$out"
echo "data: $(wc -l < "$out") digits in $out"
