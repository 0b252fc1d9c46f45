#!/usr/bin/env python3
"""PyTorch on the GPU, the peer of kiln's GPU benchmarks: workloads W1-W5 of docs/benchmarks.md at
their GPU sizes, in PyTorch eager and in torch.compile's modes.

  W1  y = gelu(x*1.5 + 0.5) * sigmoid(x) + tanh(x), n = 2^26 (exact erf GELU)
  W2  layer_norm(x + r, gamma, beta, eps=1e-5) over the last axis, x and r [16384, 768]
  W3  softmax(s * 0.125) over the last axis, s [16384, 1024]
  W4  gelu(x @ W1 + b1) @ W2 + b2, W1 [768, 3072], W2 [3072, 768], B in {1, 16, 256, 4096}
  EmbBwd  an embedding's backward, deterministic: the gradient of GPT-2's token table [50257, 768]
      from ids [8, 1024] and an incoming gradient [8, 1024, 768], that is
      aten.embedding_dense_backward under torch.use_deterministic_algorithms(True)
  W5  one training step of an MLP 784-1024-1024-10 (ReLU), cross-entropy with integer labels,
      AdamW(lr=1e-3), batch 256, f32: zero_grad(set_to_none=True), forward, backward, step()

W1-W4 run in f32 and bf16, W5 in f32. TF32 is off (cuBLAS and cuDNN), so f32 products are f32.
Modes: "eager"; "compile" (torch.compile's default mode); "reduce-overhead"; "max-autotune"
(only when asked: it compiles for minutes). A compiled W5 compiles the whole step function; in
the modes that use CUDA graphs it calls torch.compiler.cudagraph_mark_step_begin() before each
step. AdamW creates its state lazily, so W5 takes one eager step before any compile.

Method (the same as kiln's): inputs from torch.randn with a fixed seed; warm-up calls (3 in eager;
in compiled modes the first call, which compiles and is reported as first_call_s, then 5 more);
then 7 repeats of k back-to-back calls between two CUDA events (k chosen so that one repeat lasts
about 20 ms, at most 1000); the time per call is the median over the repeats of elapsed / k.
Peak memory is torch.cuda.max_memory_allocated over the timed region (its counter is reset after
the warm-up), in MB (10^6 bytes). It leaves out a CUDA graph's private pool once the graph's
outputs are dead, so reduce-overhead's figure can be below its own output's size;
peak_reserved_mb (torch.cuda.max_memory_reserved, the allocator's cache emptied before each case)
counts the pool. In reduce-overhead, inductor's CUDA graphs copy W1-W4's inputs (not marked
static) into the graph's buffers on every call, which is part of the time measured. The copy
ceiling is y.copy_(x) over 2^28 f32 elements, device to device, counting bytes read and written,
in GB/s (10^9 bytes).

Usage:
  bench/peers/torch_workloads.py [--workloads W1,W2,W3,W4,W5] [--dtypes f32,bf16]
      [--modes eager,compile,reduce-overhead] [--batches 1,16,256,4096] [--json OUT.json]
      [--repeats 7] [--target-ms 20] [--device cuda|cpu]
--device cpu is for smoke tests only: it uses docs/benchmarks.md's CPU sizes and wall-clock timers.

Output: one line per case as it finishes, a table at the end, and with --json a JSON list of
  {"workload": "W1", "dtype": "f32", "batch": null or int, "mode": "eager", "ms": float or null,
   "error": str or null, "peak_mb": float or null, "peak_reserved_mb": float or null,
   "first_call_s": float or null, "k": int or null}
plus one {"workload": "copy", "gbps": float, "ms": float, "n": elements, "torch": version,
"device": name}.
The JSON file is rewritten after every case, so a run cut short leaves what it measured.
"""
import argparse
import gc
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

SEED = 0
MODES = ("eager", "compile", "reduce-overhead", "max-autotune")
DEFAULT_MODES = ("eager", "compile", "reduce-overhead")
CUDAGRAPH_MODES = ("reduce-overhead", "max-autotune")  # both use CUDA graphs (cudagraph trees)
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
WORKLOADS = ("W1", "W2", "W3", "W4", "W5", "EmbBwd")

# Sizes of docs/benchmarks.md's workloads: on the GPU, and on the CPU (smoke tests only).
SIZES = {
    "cuda": {"W1": 1 << 26, "W2": 16384, "W3": 16384, "W4": (1, 16, 256, 4096), "copy": 1 << 28},
    "cpu": {"W1": 1 << 24, "W2": 4096, "W3": 4096, "W4": (1, 16, 256), "copy": 1 << 24},
}

DEV = "cuda"


def say(*args):
    print(*args, flush=True)


# --- workloads: each builder returns (fn, inputs); fn(*inputs) is one call ----------------------

def randn(shape, dtype, scale=1.0):
    # Drawn in f32 and then cast, so f32 and bf16 cases see the same values.
    return (torch.randn(shape, device=DEV, dtype=torch.float32) * scale).to(dtype)


def w1(x):
    return F.gelu(x * 1.5 + 0.5) * torch.sigmoid(x) + torch.tanh(x)


def w2(x, r, gamma, beta):
    return F.layer_norm(x + r, (x.shape[-1],), gamma, beta, eps=1e-5)


def w3(s):
    return torch.softmax(s * 0.125, dim=-1)


def w4(x, wa, ba, wb, bb):
    return F.gelu(x @ wa + ba) @ wb + bb


def build(workload, dtype, batch):
    torch.manual_seed(SEED)
    sizes = SIZES[DEV]
    if workload == "W1":
        return w1, (randn((sizes["W1"],), dtype),)
    if workload == "W2":
        rows = sizes["W2"]
        return w2, (randn((rows, 768), dtype), randn((rows, 768), dtype),
                    randn((768,), dtype), randn((768,), dtype))
    if workload == "W3":
        return w3, (randn((sizes["W3"], 1024), dtype),)
    if workload == "W4":
        # Weights scaled by 1/sqrt(fan-in), so the values stay of order 1.
        return w4, (randn((batch, 768), dtype),
                    randn((768, 3072), dtype, 768 ** -0.5), randn((3072,), dtype),
                    randn((3072, 768), dtype, 3072 ** -0.5), randn((768,), dtype))
    if workload == "W5":
        return build_w5()
    if workload == "EmbBwd":
        vocab = 50257
        ids = torch.randint(0, vocab, (8, 1024), device=DEV)
        return (lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, vocab, -1, False)), \
            (randn((8, 1024, 768), dtype), ids)
    raise ValueError(workload)


def build_w5():
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # betas, eps, weight_decay=0.01 default
    x = torch.randn(256, 784, device=DEV)
    labels = torch.randint(0, 10, (256,), device=DEV)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        return loss

    # One eager step, so that AdamW's lazily created state (step, exp_avg, exp_avg_sq) exists
    # before any compile: created inside a CUDA-graphed step it would live in the graph's pool
    # and be overwritten by the next replay.
    step()
    sync()
    return step, ()


# --- timing ---------------------------------------------------------------------------------

def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def measure(call, k):
    """ms per call over k back-to-back calls."""
    sync()
    if DEV == "cuda":
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(k):
            call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / k
    t0 = time.perf_counter()
    for _ in range(k):
        call()
    return (time.perf_counter() - t0) * 1e3 / k


def time_calls(call, repeats, target_ms):
    """(median ms per call over `repeats` repeats of k calls, k)."""
    estimate = measure(call, 3)
    k = int(min(1000, max(1, math.ceil(target_ms / max(estimate, 1e-6)))))
    return statistics.median(measure(call, k) for _ in range(repeats)), k


def reset_peak():
    if DEV == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_mb():
    return torch.cuda.max_memory_allocated() / 1e6 if DEV == "cuda" else None


def peak_reserved_mb():
    return torch.cuda.max_memory_reserved() / 1e6 if DEV == "cuda" else None


def cleanup(compiled):
    if compiled:
        try:
            torch._dynamo.reset()
        except Exception:
            pass
        try:
            from torch._inductor.cudagraph_trees import reset_cudagraph_trees
            reset_cudagraph_trees()
        except Exception:
            pass
    gc.collect()
    if DEV == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def short_error(e):
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text[:120]


def mark_step_begin_fn():
    compiler = getattr(torch, "compiler", None)
    fn = getattr(compiler, "cudagraph_mark_step_begin", None)
    if fn is None:
        from torch._inductor.cudagraph_trees import mark_step_begin as fn
    return fn


# --- one case ---------------------------------------------------------------------------------

def run_case(workload, dtype_name, batch, mode, repeats, target_ms):
    rec = {"workload": workload, "dtype": dtype_name, "batch": batch, "mode": mode,
           "ms": None, "error": None, "peak_mb": None, "peak_reserved_mb": None,
           "first_call_s": None, "k": None}
    try:
        # Deterministic kernels for the embedding's backward (kiln's scatter is deterministic).
        torch.use_deterministic_algorithms(workload == "EmbBwd")
        fn, inputs = build(workload, DTYPES[dtype_name], batch)
        if mode == "eager":
            f = fn
        else:
            if not hasattr(torch, "compile"):
                raise RuntimeError(f"torch.compile is not in torch {torch.__version__}")
            f = torch.compile(fn) if mode == "compile" else torch.compile(fn, mode=mode)

        if workload == "W5" and mode in CUDAGRAPH_MODES:
            mark = mark_step_begin_fn()

            def call():
                mark()
                return f()
        else:
            def call():
                return f(*inputs)

        t0 = time.perf_counter()
        call()
        sync()
        rec["first_call_s"] = time.perf_counter() - t0
        for _ in range(2 if mode == "eager" else 5):  # 3 or 6 warm-up calls in all
            call()
        sync()

        reset_peak()
        ms, k = time_calls(call, repeats, target_ms)
        rec.update(ms=ms, k=k, peak_mb=peak_mb(), peak_reserved_mb=peak_reserved_mb())
    except Exception as e:  # one failing case never stops the run
        rec["error"] = short_error(e)
    return rec


def copy_bandwidth(repeats, target_ms):
    torch.manual_seed(SEED)
    n = SIZES[DEV]["copy"]
    x = randn((n,), torch.float32)
    y = torch.empty_like(x)

    def call():
        return y.copy_(x)

    for _ in range(3):
        call()
    sync()
    ms, _ = time_calls(call, repeats, target_ms)
    del x, y
    cleanup(False)
    return ms, 2 * 4 * n / (ms * 1e-3) / 1e9


# --- driver -----------------------------------------------------------------------------------

def parse_list(text, allowed, what):
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad:
        raise SystemExit(f"unknown {what}: {', '.join(bad)} (known: {', '.join(allowed)})")
    return items


def cases(workloads, dtypes, batches):
    for w in WORKLOADS:
        if w not in workloads:
            continue
        if w == "W5":
            if "f32" in dtypes:
                yield w, "f32", None
            continue
        for d in DTYPES:
            if d not in dtypes:
                continue
            if w == "W4":
                for b in batches:
                    yield w, d, b
            else:
                yield w, d, None


def fmt_ms(r):
    return f"{r['ms']:.4f}" if r.get("ms") is not None else "error"


def print_table(results, modes):
    say("")
    say("PyTorch, ms per call (median of repeats); peak MB in parentheses")
    head = f"{'case':<16}" + "".join(f"{m:>22}" for m in modes)
    say(head)
    say("-" * len(head))
    rows = {}
    for r in results:
        if r["workload"] == "copy":
            continue
        key = (r["workload"], r["dtype"], r["batch"])
        rows.setdefault(key, {})[r["mode"]] = r
    for (w, d, b), by_mode in rows.items():
        name = f"{w}{'' if b is None else f' B{b}'} {d}"
        cells = []
        for m in modes:
            r = by_mode.get(m)
            if r is None:
                cells.append("-")
            elif r["ms"] is None:
                cells.append("error")
            else:
                peak = f" ({r['peak_mb']:.0f})" if r.get("peak_mb") is not None else ""
                cells.append(f"{r['ms']:.4f}{peak}")
        say(f"{name:<16}" + "".join(f"{c:>22}" for c in cells))
    errors = [r for r in results if r.get("error")]
    if errors:
        say("")
        say("Errors:")
        for r in errors:
            b = "" if r["batch"] is None else f" B{r['batch']}"
            say(f"  {r['workload']}{b} {r['dtype']} {r['mode']}: {r['error']}")
    for r in results:
        if r["workload"] == "copy":
            say(f"\ncopy ceiling: {r['gbps']:.0f} GB/s (y.copy_(x), {SIZES[DEV]['copy']} f32, read + written)")


def main():
    global DEV
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated, of W1..W5, EmbBwd")
    p.add_argument("--dtypes", default="f32,bf16", help="comma-separated, of f32,bf16 (W5: f32 only)")
    p.add_argument("--modes", default=",".join(DEFAULT_MODES),
                   help=f"comma-separated, of {','.join(MODES)}")
    p.add_argument("--batches", default=None, help="W4's batches (default 1,16,256,4096)")
    p.add_argument("--json", default=None, help="write the results as JSON to this path")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--target-ms", type=float, default=20.0, help="length of one repeat")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cpu: smoke tests only (CPU sizes, wall-clock timers)")
    a = p.parse_args()

    DEV = a.device
    workloads = parse_list(a.workloads, WORKLOADS, "workload")
    dtypes = parse_list(a.dtypes, tuple(DTYPES), "dtype")
    modes = parse_list(a.modes, MODES, "mode")
    batches = ([int(b) for b in a.batches.split(",")] if a.batches else list(SIZES[DEV]["W4"]))

    if DEV == "cuda":
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device visible to torch (use --device cpu for a smoke test)")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        device_name = torch.cuda.get_device_name()
    else:
        device_name = "cpu"
    say(f"torch {torch.__version__} on {device_name}; workloads {','.join(workloads)}; "
        f"dtypes {','.join(dtypes)}; modes {','.join(modes)}")

    results = []

    def dump():
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)

    started = time.perf_counter()
    try:
        ms, gbps = copy_bandwidth(a.repeats, a.target_ms)
        results.append({"workload": "copy", "gbps": gbps, "ms": ms, "n": SIZES[DEV]["copy"],
                        "torch": torch.__version__, "device": device_name})
        say(f"copy ceiling: {gbps:.0f} GB/s ({ms:.4f} ms per copy)")
    except Exception as e:
        say(f"copy ceiling: error: {short_error(e)}")
    dump()

    for w, d, b in cases(workloads, dtypes, batches):
        for m in modes:
            rec = run_case(w, d, b, m, a.repeats, a.target_ms)
            cleanup(m != "eager")
            results.append(rec)
            dump()
            name = f"{w}{'' if b is None else f' B{b}'} {d} {m}"
            if rec["error"]:
                say(f"{name:<32} error: {rec['error']}")
            else:
                peak = f"{rec['peak_mb']:9.1f} MB" if rec["peak_mb"] is not None else "        - MB"
                say(f"{name:<32} {rec['ms']:10.4f} ms  peak {peak}  "
                    f"first call {rec['first_call_s']:6.2f} s  k={rec['k']}")

    print_table(results, modes)
    say(f"\ntotal {time.perf_counter() - started:.0f} s")
    if a.json:
        say(f"wrote {a.json}")


if __name__ == "__main__":
    main()
