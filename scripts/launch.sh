#!/usr/bin/env bash
# Starts a program as N ranks of a data-parallel run on this host, as `torchrun --nproc-per-node N`
# does: each process gets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT, which
# kiln::Trainer reads (docs/distributed.md).
#
#   scripts/launch.sh -n 2 ./build/examples/train_gpt data/fortunes.txt --steps 500
#   scripts/launch.sh -n 2 --port 29600 ./my_program --its-arguments
#
# -n N        the number of ranks (default 2)
# --port P    rank 0's TCP port (default: MASTER_PORT if set, else 29500)
# On a host with at least N NVIDIA GPUs and CUDA_VISIBLE_DEVICES unset, rank r sees only GPU r
# (as its cuda:0). OMP_NUM_THREADS, unless set, is the host's cores divided among the ranks. Rank 0
# writes to this terminal; the others' lines are prefixed with "[rank r]". When a rank fails
# the others are stopped, and the script exits with the first failing rank's status.
set -uo pipefail

n=2
port="${MASTER_PORT:-29500}"
while [ $# -gt 0 ]; do
  case "$1" in
    -n) n="$2"; shift 2 ;;
    --port) port="$2"; shift 2 ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ] || ! [[ "$n" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: scripts/launch.sh [-n N] [--port P] program [arguments...]" >&2
  exit 2
fi

# The host's cores shared among the ranks (each rank's OpenMP threads), unless OMP_NUM_THREADS
# is set: N processes of as many threads as cores would oversubscribe them N times.
threads="${OMP_NUM_THREADS:-$(( $(nproc) / n > 0 ? $(nproc) / n : 1 ))}"

gpus=0
if [ -z "${CUDA_VISIBLE_DEVICES+set}" ] && command -v nvidia-smi > /dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
fi

if [ "$gpus" -gt 0 ] && [ "$gpus" -lt "$n" ]; then
  echo "launch.sh: $n ranks but $gpus GPUs: CUDA_VISIBLE_DEVICES is left as it is (NCCL needs a GPU per rank)" >&2
fi

pids=()
for ((r = 0; r < n; r++)); do
  env_vars=(RANK="$r" WORLD_SIZE="$n" LOCAL_RANK="$r" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" OMP_NUM_THREADS="$threads")
  if [ "$gpus" -ge "$n" ]; then env_vars+=(CUDA_VISIBLE_DEVICES="$r"); fi
  if [ "$r" -eq 0 ]; then
    env "${env_vars[@]}" "$@" &
  else
    env "${env_vars[@]}" "$@" > >(sed -u "s/^/[rank $r] /") 2> >(sed -u "s/^/[rank $r] /" >&2) &
  fi
  pids+=($!)
done

# Every 0.1 s: the ranks that ended, with their status; after the first failure, stop the rest.
status=0
live=("${pids[@]}")
while [ "${#live[@]}" -gt 0 ]; do
  next=()
  for p in "${live[@]}"; do
    if kill -0 "$p" 2> /dev/null; then next+=("$p"); continue; fi
    wait "$p"
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$status" -eq 0 ]; then status=$rc; fi
  done
  live=("${next[@]}")
  if [ "$status" -ne 0 ]; then for p in "${live[@]}"; do kill "$p" 2> /dev/null; done; fi
  if [ "${#live[@]}" -gt 0 ]; then sleep 0.1; fi
done
wait  # the other ranks' line filters, until they have written everything
exit "$status"
