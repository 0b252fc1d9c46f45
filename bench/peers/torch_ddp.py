#!/usr/bin/env python3
"""PyTorch's DistributedDataParallel training the char-GPT of bench/peers/torch_train_gpt.py,
the peer of kiln's data-parallel Trainer (docs/distributed.md): the same model, data,
optimiser, schedule and per-rank batch, on N ranks.

  Ranks  N processes on this host (torch.multiprocessing), a process group over TCP on
         127.0.0.1:--port, backend gloo on the CPU and nccl on GPUs (rank r on cuda:r).
  Data   as kiln's Trainer shards it: every rank shuffles the epoch with the same seed, and
         rank r takes samples r, r + N, r + 2N, ... of that order (padded to a multiple of N by
         repeating its first samples), in batches of --batch: a global batch of N --batch.
  Step   DDP (bucket_cap_mb 25, its default) forward and backward, the gradients averaged over
         the ranks; clip_grad_norm_(1.0); AdamW as torch_train_gpt.py; the loss and gradient norm
         averaged over the ranks (one more all_reduce of two numbers, as kiln's Trainer logs the
         ranks' mean loss) and read back.
  Timing 3 warm-up steps, then --timing-steps steps between two barriers (CUDA synchronised):
         ms per step and the global batch's samples per second.

Usage:
  bench/peers/torch_ddp.py --ranks 2 --threads 1                   # CPU, gloo, 1 thread a rank
  bench/peers/torch_ddp.py --ranks 2 --device cuda                 # GPUs, nccl
Options: --ranks 2, --device cpu, --threads 1 (torch.set_num_threads in each rank), --timing-steps
20, --port 29710, --data data/fortunes.txt, --batch 32 (per rank), --steps 2500 (the schedule's
length), --seed 7.
Output: one line from rank 0: ranks, backend, ms per step, samples per second.
"""
import argparse
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as torch_train_gpt.py: OpenBLAS's own threads off

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_train_gpt as peer  # noqa: E402  (the model, data and schedule)


def rank_main(rank, args):
    world = args.ranks
    cuda = args.device == "cuda"
    backend = "nccl" if cuda else "gloo"
    if cuda:
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=world)
    torch.set_num_threads(args.threads)
    device = torch.device(f"cuda:{rank}" if cuda else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False

    corpus = peer.Corpus(args.data)
    V, S = len(corpus.vocab), peer.CONTEXT
    n = peer.windows(corpus.train, S, max(1, S // 2))
    data = peer.Batches(corpus.train, S, max(1, S // 2), device)
    model = peer.GPT(V, S, peer.EMBED).init(peer.INIT_SEED).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank] if cuda else None, bucket_cap_mb=25)
    opt = torch.optim.AdamW(model.parameters(), lr=peer.LR, betas=(0.9, 0.999), eps=1e-8, weight_decay=peer.WEIGHT_DECAY)

    mine_len = (n + world - 1) // world
    per_epoch = (mine_len + args.batch - 1) // args.batch
    state = {"step": 0, "epoch": 0, "in_epoch": 0, "order": None}

    def order():
        full = np.random.default_rng(args.seed + state["epoch"]).permutation(n)
        return full[(np.arange(mine_len) * world + rank) % n]

    state["order"] = order()

    def step():
        if state["in_epoch"] == per_epoch:
            state["epoch"], state["in_epoch"] = state["epoch"] + 1, 0
            state["order"] = order()
        first = state["in_epoch"] * args.batch
        ids, labels = data.batch(state["order"][first:first + args.batch])
        lr = peer.learning_rate_at(peer.LR, state["step"], args.steps)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss = ddp(ids, labels)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), peer.MAX_GRAD_NORM)
        opt.step()
        stats = torch.stack([loss.detach(), norm.detach().to(loss.dtype)])
        dist.all_reduce(stats)
        state["step"] += 1
        state["in_epoch"] += 1
        return (stats / world).tolist()

    for _ in range(3):
        step()
    peer.sync(device)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.timing_steps):
        loss, _ = step()
    peer.sync(device)
    dist.barrier()
    ms = 1e3 * (time.perf_counter() - t0) / args.timing_steps
    if rank == 0:
        print(f"torch {torch.__version__} DDP, {world} ranks ({backend}, {args.threads} threads each): "
              f"{ms:.2f} ms/step, {world * args.batch * 1e3 / ms:.0f} samples/s (global batch {world * args.batch}); "
              f"loss after {state['step']} steps {loss:.4f}", flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description="PyTorch DDP peer of kiln's data-parallel Trainer")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--timing-steps", type=int, default=20)
    ap.add_argument("--port", type=int, default=29710)
    ap.add_argument("--data", default="data/fortunes.txt")
    ap.add_argument("--batch", type=int, default=peer.BATCH)
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    if args.ranks < 1 or args.threads < 1 or args.timing_steps < 1 or args.batch < 1:
        ap.error("--ranks, --threads, --timing-steps and --batch must be at least 1")
    if args.device == "cuda" and torch.cuda.device_count() < args.ranks:
        sys.exit(f"--device cuda: {args.ranks} ranks need as many GPUs; torch sees {torch.cuda.device_count()}")
    mp.spawn(rank_main, args=(args,), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
