#!/usr/bin/env python3
"""PyTorch's training of a character-level GPT, the peer of kiln's examples/train_gpt.cpp: the
same data, model, optimiser, schedule and batches, so that steps/s and loss curves can be set
side by side.

  Data   data/fortunes.txt (scripts/fetch_fortunes.sh), parsed as train_gpt's Corpus: the
         vocabulary is the distinct bytes, sorted; the text splits into fortunes after each
         "\\n%\\n"; every tenth fortune (n % 10 == 9) is validation. A sample is a window of 64 + 1
         characters; training windows start every 32 characters (input chars [32 i, 32 i + 64),
         labels one further), validation windows every 64, as train_gpt's. Batch 32;
         each epoch visits the windows in an order shuffled with seed + epoch (numpy's generator,
         not kiln's mt19937_64, so the order differs); the last, partial batch of an epoch is
         kept (dataloader_drop_last false). Validation: the first 2048 windows, in batches of 64.
  Model  GPT-2 in plain PyTorch (no transformers): 4 layers, 4 heads, n_embd 128, n_inner 512,
         64 positions, pre-LN blocks, gelu tanh (gelu_new), LayerNorm eps 1e-5, the LM head tied
         to wte, no dropout; HF's Conv1D layout ([in, out] weights). Initialised as
         GPT2ForTraining::init: N(0, 0.02), N(0, 0.02 / sqrt(8)) for attn.c_proj and mlp.c_proj,
         zero biases, layer norms 1 and 0 (torch's generator, seed 1234: not kiln's numbers).
         Attention: F.scaled_dot_product_attention(is_causal=True) where torch has it (>= 2.0),
         else a masked softmax.
  Step   the batch gathered on the device, forward, mean cross-entropy over all B * S positions,
         backward, clip_grad_norm_(1.0), AdamW(lr 8e-3, betas 0.9/0.999, eps 1e-8, weight decay
         0.1 on every parameter, as kiln), and the loss and gradient norm read back to the host
         (kiln's Trainer reads both at every step). Learning rate of update k (0 for the first,
         which therefore runs at lr 0): kiln::learning_rate_at, HF's cosine with 100 warm-up
         steps. Only the model (forward and loss) goes through torch.compile in the compiled
         modes; the optimiser runs eagerly.
  Timing per mode, as train_gpt's ms_per_step: a fresh model, warm-up steps (3 eager, 5 compiled:
         compilation and first calls excluded), then --timing-steps steps on the clock (CUDA
         synchronised before each reading). TF32 is off, so f32 products are f32.
  Train  with --train, --steps updates in the first mode, logging as kiln's Trainer does: at
         every --log-every-th step (and the last) the mean training loss of the steps since the
         previous record; then the validation loss. The unigram baseline is train_gpt's
         unigram_loss (add-one smoothed character frequencies of the training text).

Usage:
  bench/peers/torch_train_gpt.py --device cpu --threads 2 --train          # CPU, eager
  bench/peers/torch_train_gpt.py --device cuda --modes eager,default,reduce-overhead --train \\
      --json torch_train_gpt.json                                          # GPU (torch >= 2.0)
Options: --steps 2500, --modes eager (a comma list of eager, default, reduce-overhead,
max-autotune; torch without torch.compile has only eager), --timing-steps 20, --log-every 250,
--seed 7, --data data/fortunes.txt, --json OUT; as train_gpt's options, --context 64, --batch 32,
--embd 128 (n_inner 4 n_embd) and --lr 8e-3, the validation windows then covering the first
131072 characters (--valid-windows N: fewer, for a quick check). A CPU figure needs a torch
whose matrix products are fast: the script says when this torch's BLAS is netlib's reference one
(BLAS_INFO=generic, as Debian's python3-torch with the default libblas3). With OpenBLAS as the
system BLAS, OpenBLAS's own threads are off unless OPENBLAS_NUM_THREADS is set (the script sets
it to 1 before importing torch): torch's --threads then parallelise around single-threaded
products, its fastest setting (2 threads on a 2-core machine: 118 ms a step, against 217 ms with
OpenBLAS's threads on as well).
Output: lines on stdout; with --json {torch_version, device, threads, blas, context, batch, embd,
lr, modes: {mode: {ms_per_step, steps_per_s} or {error}}, train: {mode, steps, seconds,
steps_per_s, log: [[step, loss], ...], training_loss, valid_loss}, unigram}.
"""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the system BLAS (see above)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LAYERS, HEADS = 4, 4  # template arguments in train_gpt.cpp; the rest are its defaults
CONTEXT, EMBED, BATCH, LR = 64, 128, 32, 8e-3
EVAL_BATCH, VALID_CHARS = 64, 131072  # validation: the first 131072 characters' windows (2048 of 64)
WARMUP, WEIGHT_DECAY, MAX_GRAD_NORM = 100, 0.1, 1.0
EPS = 1e-5
INIT_SEED = 1234
MODES = ("eager", "default", "reduce-overhead", "max-autotune")


def say(*args):
    print(*args, flush=True)


# --- data: train_gpt.cpp's Corpus, Windows and unigram_loss -----------------------------------

class Corpus:
    def __init__(self, path):
        try:
            text = open(path, "rb").read()
        except OSError as e:
            sys.exit(f"cannot read {path} (run scripts/fetch_fortunes.sh): {e}")
        raw = np.frombuffer(text, dtype=np.uint8)
        self.vocab = np.unique(raw)  # the distinct bytes, sorted
        table = np.zeros(256, dtype=np.int64)
        table[self.vocab] = np.arange(len(self.vocab))
        ids = table[raw]
        train, valid = [], []
        start, n = 0, 0
        while start < len(text):
            end = text.find(b"\n%\n", start)
            end = len(text) if end < 0 else end + 3
            (valid if n % 10 == 9 else train).append(ids[start:end])
            n += 1
            start = end
        self.train = np.concatenate(train) if train else np.zeros(0, np.int64)
        self.valid = np.concatenate(valid) if valid else np.zeros(0, np.int64)


def windows(stream, context, stride, limit=0):
    n = (len(stream) - 1 - context) // stride + 1 if len(stream) > context else 0
    return min(n, limit) if limit > 0 else n


def unigram_loss(c):
    count = np.bincount(c.train, minlength=len(c.vocab)).astype(np.float64) + 1.0  # add-one smoothing
    total = float(len(c.train) + len(c.vocab))
    return float(-np.log(count[c.valid] / total).mean())


class Batches:
    """Windows of a stream (a tensor on the device), one every `stride` characters, gathered by
    sample index."""

    def __init__(self, stream, context, stride, device):
        self.stream = torch.as_tensor(stream, dtype=torch.int64).to(device)
        self.offsets = torch.arange(context + 1, device=device)
        self.stride, self.device = stride, device

    def batch(self, rows):
        rows = torch.as_tensor(rows, dtype=torch.int64).to(self.device)
        chunk = self.stream[rows[:, None] * self.stride + self.offsets]  # [B, S + 1]
        return chunk[:, :-1], chunk[:, 1:]


# --- the model ----------------------------------------------------------------------------------

class Conv1D(torch.nn.Module):
    """HF's Conv1D: y = x W + b with W [in, out]."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(n_in, n_out))
        self.bias = torch.nn.Parameter(torch.zeros(n_out))

    def forward(self, x):
        shape = x.shape[:-1] + (self.weight.shape[1],)
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).view(shape)


HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def causal_attention(q, k, v):  # [B, H, S, D] each
    if HAS_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    S = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


class Block(torch.nn.Module):
    def __init__(self, E):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(E, eps=EPS)
        self.attn = torch.nn.ModuleDict({"c_attn": Conv1D(E, 3 * E), "c_proj": Conv1D(E, E)})
        self.ln_2 = torch.nn.LayerNorm(E, eps=EPS)
        self.mlp = torch.nn.ModuleDict({"c_fc": Conv1D(E, 4 * E), "c_proj": Conv1D(4 * E, E)})  # n_inner 4 E

    def forward(self, h):
        B, S, E = h.shape
        q, k, v = self.attn["c_attn"](self.ln_1(h)).split(E, dim=-1)
        q, k, v = (t.view(B, S, HEADS, E // HEADS).transpose(1, 2) for t in (q, k, v))
        a = causal_attention(q, k, v).transpose(1, 2).reshape(B, S, E)
        h = h + self.attn["c_proj"](a)
        return h + self.mlp["c_proj"](F.gelu(self.mlp["c_fc"](self.ln_2(h)), approximate="tanh"))


class GPT(torch.nn.Module):
    """GPT-2 whose forward is the mean cross-entropy of the next character at every position. The
    parameters' names are kiln's (wte, wpe, h.<l>.attn.c_attn.weight, ..., ln_f.bias)."""

    def __init__(self, vocab, context=CONTEXT, embd=EMBED):
        super().__init__()
        self.wte = torch.nn.Parameter(torch.empty(vocab, embd))
        self.wpe = torch.nn.Parameter(torch.empty(context, embd))
        self.h = torch.nn.ModuleList(Block(embd) for _ in range(LAYERS))
        self.ln_f = torch.nn.LayerNorm(embd, eps=EPS)

    def init(self, seed):
        g = torch.Generator().manual_seed(seed)
        residual = 0.02 / math.sqrt(2.0 * LAYERS)
        with torch.no_grad():
            for name, p in self.named_parameters():  # in kiln's order: wte, wpe, then layer by layer
                if name.endswith("c_proj.weight"):
                    p.copy_(torch.randn(p.shape, generator=g) * residual)
                elif p.dim() == 2:  # wte, wpe, c_attn, c_fc
                    p.copy_(torch.randn(p.shape, generator=g) * 0.02)
                elif ".ln_" in name or name.startswith("ln_"):
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                else:  # biases
                    p.zero_()
        return self

    def forward(self, ids, labels):
        S = ids.shape[1]
        h = self.wte[ids] + self.wpe[:S]
        for block in self.h:
            h = block(h)
        logits = self.ln_f(h) @ self.wte.t()  # [B, S, V], the tied head
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def learning_rate_at(lr, step, total):
    """kiln::learning_rate_at for "cosine": update `step` (0 for the first) of `total`."""
    if step < WARMUP:
        return lr * step / max(1.0, WARMUP)
    rest = max(1.0, total - WARMUP)
    return lr * max(0.0, 0.5 * (1.0 + math.cos(math.pi * (step - WARMUP) / rest)))


# --- the training loop ----------------------------------------------------------------------------

def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


class Run:
    """A fresh model and optimiser, stepping through the epochs as kiln::Trainer does."""

    def __init__(self, model, data, n_samples, batch, lr, total, seed, mode):
        self.model, self.batch, self.lr = model, batch, lr
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=lr, betas=(0.9, 0.999), eps=1e-8,
                                     weight_decay=WEIGHT_DECAY)
        if mode == "eager":
            self.loss = self.model
        else:
            self.loss = torch.compile(self.model) if mode == "default" else torch.compile(self.model, mode=mode)
        self.mark_step = None
        if mode == "reduce-overhead" and hasattr(torch, "compiler") and \
                hasattr(torch.compiler, "cudagraph_mark_step_begin"):
            self.mark_step = torch.compiler.cudagraph_mark_step_begin
        self.data, self.n, self.total, self.seed = data, n_samples, total, seed
        self.per_epoch = (n_samples + batch - 1) // batch  # the last, partial batch kept
        self.step_count, self.epoch, self.in_epoch = 0, 0, 0
        self.order = self.epoch_order()

    def epoch_order(self):
        return np.random.default_rng(self.seed + self.epoch).permutation(self.n)

    def step(self):
        """One update; (loss, gradient norm before clipping)."""
        if self.in_epoch == self.per_epoch:
            self.epoch, self.in_epoch = self.epoch + 1, 0
            self.order = self.epoch_order()
        first = self.in_epoch * self.batch
        ids, labels = self.data.batch(self.order[first:first + self.batch])
        lr = learning_rate_at(self.lr, self.step_count, self.total)
        for group in self.opt.param_groups:
            group["lr"] = lr
        if self.mark_step is not None:
            self.mark_step()
        self.opt.zero_grad(set_to_none=True)
        loss = self.loss(ids, labels)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), MAX_GRAD_NORM)
        self.opt.step()
        self.step_count += 1
        self.in_epoch += 1
        loss_value, norm_value = torch.stack([loss.detach(), norm.detach().to(loss.dtype)]).tolist()
        return loss_value, norm_value, lr

    @torch.no_grad()
    def evaluate(self, data, n):
        total = 0.0
        for first in range(0, n, EVAL_BATCH):
            rows = np.arange(first, min(n, first + EVAL_BATCH))
            ids, labels = data.batch(rows)
            total += self.model(ids, labels).item() * len(rows)
        return total / n


def ms_per_step(make_run, mode, timing_steps, device):
    run = make_run(mode)
    for _ in range(3 if mode == "eager" else 5):
        run.step()
    sync(device)
    t0 = time.perf_counter()
    for _ in range(timing_steps):
        run.step()
    sync(device)
    return 1e3 * (time.perf_counter() - t0) / timing_steps


def main():
    ap = argparse.ArgumentParser(description="PyTorch peer of kiln's examples/train_gpt.cpp")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    ap.add_argument("--steps", type=int, default=2500)
    ap.add_argument("--modes", default="eager", help="comma list of " + ",".join(MODES))
    ap.add_argument("--data", default="data/fortunes.txt")
    ap.add_argument("--timing-steps", type=int, default=20)
    ap.add_argument("--train", action="store_true", help="also train --steps steps in the first mode")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--log-every", type=int, default=250)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--context", type=int, default=CONTEXT, help=f"characters of context (default {CONTEXT})")
    ap.add_argument("--batch", type=int, default=BATCH, help=f"training batch (default {BATCH})")
    ap.add_argument("--embd", type=int, default=EMBED, help=f"n_embd (default {EMBED}; n_inner is 4 n_embd)")
    ap.add_argument("--lr", type=float, default=LR, help=f"peak learning rate (default {LR})")
    ap.add_argument("--valid-windows", type=int, default=0,
                    help=f"validation windows (default {VALID_CHARS} // context, as train_gpt: 2048 of 64; "
                         "fewer for a quick check)")
    args = ap.parse_args()

    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            ap.error(f"--modes: {m!r} is not one of {', '.join(MODES)}")
    if min(args.steps, args.timing_steps, args.context, args.batch, args.embd) < 1 or args.valid_windows < 0:
        ap.error("--steps, --timing-steps, --context, --batch and --embd must be at least 1")
    if args.embd % HEADS != 0:
        ap.error(f"--embd must be a multiple of {HEADS}")
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("--device cuda: torch sees no CUDA device")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    corpus = Corpus(args.data)
    V = len(corpus.vocab)
    S = args.context
    n_train = windows(corpus.train, S, max(1, S // 2))
    n_valid = windows(corpus.valid, S, S, args.valid_windows or max(1, VALID_CHARS // S))
    train_data = Batches(corpus.train, S, max(1, S // 2), device)
    valid_data = Batches(corpus.valid, S, S, device)
    unigram = unigram_loss(corpus)
    n_params = sum(p.numel() for p in GPT(V, S, args.embd).parameters())
    say(f"torch {torch.__version__} on {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda"
           else f", {torch.get_num_threads()} threads, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}")
        + f"; attention: {'scaled_dot_product_attention' if HAS_SDPA else 'masked softmax'}")
    say(f"data: {len(corpus.train)} training and {len(corpus.valid)} validation characters, {V} distinct; "
        f"{n_train} training windows, {n_valid} validation windows; {n_params} parameters")
    blas = next((w.split("=", 1)[1] for w in torch.__config__.show().replace(",", " ").split()
                 if w.startswith("BLAS_INFO=")), "unknown")
    if device.type == "cpu" and blas == "generic":
        say("note: this torch was built with BLAS_INFO=generic: its matrix products go to the system's libblas "
            "(netlib's reference BLAS unless OpenBLAS or BLIS is the libblas.so.3 alternative), which can make "
            "the CPU figures many times slower than a torch with MKL or OpenBLAS")
    say(f"unigram baseline: {unigram:.3f} nats/char on the validation text (ln V = {math.log(V):.3f})")

    def make_run(mode):
        model = GPT(V, S, args.embd).init(INIT_SEED).to(device)
        return Run(model, train_data, n_train, args.batch, args.lr, args.steps, args.seed, mode)

    result = {"torch_version": torch.__version__, "device": args.device, "threads": torch.get_num_threads(),
              "blas": blas, "context": S, "batch": args.batch, "embd": args.embd, "lr": args.lr,
              "modes": {}, "unigram": unigram}
    if device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name()
    has_compile = hasattr(torch, "compile")
    usable = []
    for mode in modes:
        if mode != "eager" and not has_compile:
            why = f"torch {torch.__version__} has no torch.compile (it came with 2.0): only eager runs; skipped"
            say(f"mode {mode}: {why}")
            result["modes"][mode] = {"ms_per_step": None, "steps_per_s": None, "error": why}
            continue
        try:
            ms = ms_per_step(make_run, mode, args.timing_steps, device)
        except Exception as e:  # e.g. a compiler backend missing on this machine
            why = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            say(f"mode {mode}: failed: {why}")
            result["modes"][mode] = {"ms_per_step": None, "steps_per_s": None, "error": why}
            continue
        usable.append(mode)
        result["modes"][mode] = {"ms_per_step": ms, "steps_per_s": 1e3 / ms}
        say(f"step time (batch {args.batch} x {S} chars), {mode}: {ms:.2f} ms/step ({1e3 / ms:.2f} steps/s; "
            f"{args.timing_steps} steps timed)")

    if args.train:
        if not usable:
            sys.exit("--train: no mode could run")
        mode = usable[0]
        run = make_run(mode)
        log, pending, losses = [], [], []
        sync(device)
        t0 = time.perf_counter()
        while run.step_count < args.steps:
            loss, norm, lr = run.step()
            losses.append(loss)
            pending.append((loss, lr, norm))
            step = run.step_count
            if args.log_every > 0 and (step % args.log_every == 0 or step == args.steps):
                mean = [sum(x) / len(pending) for x in zip(*pending)]
                log.append([step, mean[0]])
                say(json.dumps({"step": step, "epoch": round(run.epoch + run.in_epoch / run.per_epoch, 4),
                                "loss": mean[0], "learning_rate": mean[1], "grad_norm": mean[2]}))
                pending = []
        sync(device)
        seconds = time.perf_counter() - t0
        valid_loss = run.evaluate(valid_data, n_valid)
        training_loss = sum(losses) / len(losses)
        say(f"trained {args.steps} steps ({mode}) in {seconds:.1f} s ({args.steps / seconds:.2f} steps/s); "
            f"training loss {training_loss:.3f}, validation loss {valid_loss:.3f} nats/char")
        result["train"] = {"mode": mode, "steps": args.steps, "seconds": seconds,
                           "steps_per_s": args.steps / seconds, "log": log, "training_loss": training_loss,
                           "valid_loss": valid_loss}

    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
