#!/usr/bin/env bash
# The layering check: every #include "kiln/..." in include/kiln points down the pipeline
#   core <- expr <- graph <- autodiff <- schedule <- lower <- backend/{cpu,cuda} <- runtime <- nn
#   <- io, text <- models <- distributed <- train
# (a header may include its own folder or any folder to its left), and neither backend includes
# the other. Prints each offending include and exits 1, or prints a one-line summary and exits 0.
#   scripts/check_layers.sh [include-root]   (default: include, from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
root="${1:-include}"

rank() {
  case "$1" in
    core) echo 0 ;; expr) echo 1 ;; graph) echo 2 ;; autodiff) echo 3 ;; schedule) echo 4 ;;
    lower) echo 5 ;; backend/cpu | backend/cuda) echo 6 ;; runtime) echo 7 ;; nn) echo 8 ;;
    io | text) echo 9 ;; models) echo 10 ;; distributed) echo 11 ;; train) echo 12 ;; kiln.hpp) echo 99 ;;
    *) echo -1 ;;
  esac
}

# The layer of a path under kiln/: its first folder, or backend/<name>.
layer_of() {
  local p="${1#kiln/}"
  case "$p" in
    backend/*) p="${p#backend/}"; echo "backend/${p%%/*}" ;;
    */*) echo "${p%%/*}" ;;
    *) echo "$p" ;;
  esac
}

bad=0
checked=0
while IFS= read -r file; do
  from="$(layer_of "${file#"$root"/}")"
  from_rank="$(rank "$from")"
  if [ "$from_rank" -lt 0 ]; then
    echo "$file: folder '$from' has no place in the layering; add it to scripts/check_layers.sh"
    bad=1
    continue
  fi
  while IFS= read -r inc; do
    [ -n "$inc" ] || continue
    checked=$((checked + 1))
    to="$(layer_of "$inc")"
    to_rank="$(rank "$to")"
    if [ "$to_rank" -lt 0 ]; then
      echo "$file: includes $inc, in a folder with no place in the layering"
      bad=1
    elif [ "$to_rank" -gt "$from_rank" ]; then
      echo "$file: includes $inc, which points up the pipeline ($from includes $to)"
      bad=1
    elif [ "$from" != "$to" ] && [ "${from%%/*}" = backend ] && [ "${to%%/*}" = backend ]; then
      echo "$file: includes $inc, across backends ($from includes $to)"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(kiln\/[^"]*\)".*/\1/p' "$file")
done < <(find "$root/kiln" -type f \( -name '*.hpp' -o -name '*.cuh' -o -name '*.h' \) | sort)

if [ "$bad" -ne 0 ]; then
  echo "check_layers: FAILED"
  exit 1
fi
echo "check_layers: $checked includes checked, all point down the pipeline and none crosses backends"
