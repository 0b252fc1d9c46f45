#!/usr/bin/env bash
# Fetches a text corpus for examples/train_gpt.cpp: the fortune cookies of Debian's `fortunes`
# package (about 2.5 MB of English text in 40 files, each fortune ended by a line "%"), joined
# into data/fortunes.txt. The package is downloaded (not installed) and unpacked. Does nothing
# when data/fortunes.txt exists.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/fortunes.txt
if [[ -s $out ]]; then exit 0; fi
mkdir -p data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"  # apt downloads as the _apt user
(cd "$tmp" && apt-get download fortunes >/dev/null 2>&1)
dpkg-deb -x "$tmp"/fortunes_*.deb "$tmp/x"
# The cookie files: regular files, not the .dat indexes or the .u8 links.
find "$tmp/x/usr/share/games/fortunes" -maxdepth 1 -type f ! -name '*.dat' | sort |
  while read -r f; do
    cat "$f"
    [[ $(tail -c1 "$f") == "" ]] || echo  # a file's last line ends
    [[ $(tail -n1 "$f") == "%" ]] || echo "%"
  done > "$out.part"
mv "$out.part" "$out"
echo "data: $(grep -c '^%$' "$out") fortunes, $(wc -c < "$out") bytes in $out"
