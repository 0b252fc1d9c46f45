#!/usr/bin/env python3
"""PyTorch and Hugging Face transformers on the GPU, the peer of kiln's model benchmarks
(bench/bench_models.cpp, docs/benchmarks.md's W6 and W7). It loads the same random-weight
checkpoints that bench_models_gpu writes at its first run, from the same directories.

  W6  ViTForImageClassification (ViT-B/16, 2 labels): one batch of 224 x 224 images, logits;
      batch 1, 16, 64; f32 and bf16. Modes: eager, compile (torch.compile's default),
      reduce-overhead, max-autotune (only when asked: it tunes for minutes).
  W7  GPT2LMHeadModel (GPT-2 small), bf16, batch 1: generate() of exactly 64 new tokens after a
      32-token prompt, greedy; ms per new token = one generate() / 64, the prompt included.
      Modes: eager (HF's dynamic cache), static (cache_implementation="static", with which
      transformers compiles the decoding step itself), reduce-overhead (static cache and the
      forward wrapped in torch.compile(mode="reduce-overhead", fullgraph=True), as the
      inference guide does).
  W7prefill  the forward over the 32-token prompt (logits for every position), in W6's modes.

The prompt is the one bench_models uses: token i is (7919 i) mod 50257. The images are
torch.randn with a fixed seed. TF32 is off, so f32 products are f32.

Method (the same as torch_workloads.py): the first call is timed on its own (first_call_s:
compilation and capture), then warm-up calls, then 7 repeats of k back-to-back calls between two
CUDA events, k chosen so that a repeat lasts about 20 ms; the figure is the median of elapsed / k.
peak_mb is torch.cuda.max_memory_allocated over the whole case, model included, in 10^6 bytes.

Usage:
  bench/peers/torch_models.py [--workloads W6,W7,W7prefill] [--dtypes f32,bf16]
      [--modes eager,compile,reduce-overhead] [--batches 1,16,64] [--json OUT.json]
      [--gpt2 DIR] [--vit DIR]
Output: a line per case, and with --json a list of {"workload", "dtype", "batch", "mode", "ms",
"ms_per_token" (W7), "first_call_s", "peak_mb", "error"}, rewritten after every case.
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_workloads import cleanup, short_error, sync, time_calls  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
W6_MODES = ("eager", "compile", "reduce-overhead", "max-autotune")
W7_MODES = ("eager", "static", "reduce-overhead")


def say(*args):
    print(*args, flush=True)


def w7_prompt():
    return torch.tensor([[(i * 7919) % 50257 for i in range(32)]], device="cuda")


def compiled(fn, mode):
    if mode == "eager":
        return fn
    return torch.compile(fn) if mode == "compile" else torch.compile(fn, mode=mode)


def timed_case(rec, call, repeats, target_ms):
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    call()
    sync()
    rec["first_call_s"] = time.perf_counter() - t0
    for _ in range(3):
        call()
    sync()
    rec["ms"], rec["k"] = time_calls(call, repeats, target_ms)
    rec["peak_mb"] = torch.cuda.max_memory_allocated() / 1e6


def run_w6(path, dtype, batch, mode, repeats, target_ms):
    from transformers import ViTForImageClassification
    rec = {"workload": "W6", "dtype": dtype, "batch": batch, "mode": mode, "ms": None, "error": None}
    try:
        model = ViTForImageClassification.from_pretrained(path, torch_dtype=DTYPES[dtype]).cuda().eval()
        torch.manual_seed(0)
        images = torch.randn(batch, 3, 224, 224, device="cuda").to(DTYPES[dtype])
        forward = compiled(lambda x: model(pixel_values=x).logits, mode)
        with torch.no_grad():
            timed_case(rec, lambda: forward(images), repeats, target_ms)
        del model
    except Exception as e:  # one failing case never stops the run
        rec["error"] = short_error(e)
    cleanup(mode != "eager")
    return rec


def run_w7_prefill(path, mode, repeats, target_ms):
    from transformers import GPT2LMHeadModel
    rec = {"workload": "W7prefill", "dtype": "bf16", "batch": 1, "mode": mode, "ms": None, "error": None}
    try:
        model = GPT2LMHeadModel.from_pretrained(path, torch_dtype=torch.bfloat16).cuda().eval()
        ids = w7_prompt()
        forward = compiled(lambda x: model(input_ids=x, use_cache=False).logits, mode)
        with torch.no_grad():
            timed_case(rec, lambda: forward(ids), repeats, target_ms)
        del model
    except Exception as e:
        rec["error"] = short_error(e)
    cleanup(mode != "eager")
    return rec


def run_w7(path, mode, repeats):
    from transformers import GPT2LMHeadModel
    rec = {"workload": "W7", "dtype": "bf16", "batch": 1, "mode": mode, "ms": None, "error": None}
    try:
        model = GPT2LMHeadModel.from_pretrained(path, torch_dtype=torch.bfloat16).cuda().eval()
        ids = w7_prompt()
        kwargs = dict(max_new_tokens=64, min_new_tokens=64, do_sample=False, pad_token_id=0)
        if mode != "eager":
            kwargs["cache_implementation"] = "static"
        if mode == "reduce-overhead":
            model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)

        def call():
            return model.generate(ids, **kwargs)

        with torch.no_grad():
            # One generate() lasts tens of ms: k = 1 call per repeat.
            timed_case(rec, call, repeats, target_ms=0)
        rec["ms_per_token"] = rec["ms"] / 64
        del model
    except Exception as e:
        rec["error"] = short_error(e)
    cleanup(mode != "eager")
    return rec


def main():
    default_dir = tempfile.gettempdir()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="W6,W7,W7prefill")
    p.add_argument("--dtypes", default="f32,bf16", help="W6's element types")
    p.add_argument("--modes", default="eager,compile,reduce-overhead",
                   help="W6's and W7prefill's modes; W7 always runs eager, static and reduce-overhead")
    p.add_argument("--batches", default="1,16,64", help="W6's batch sizes")
    p.add_argument("--gpt2", default=os.path.join(default_dir, "kiln_bench_gpt2_small"))
    p.add_argument("--vit", default=os.path.join(default_dir, "kiln_bench_vit_base"))
    p.add_argument("--json", default=None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--target-ms", type=float, default=20.0)
    a = p.parse_args()

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    workloads = a.workloads.split(",")
    modes = a.modes.split(",")
    for m in modes:
        if m not in W6_MODES:
            raise SystemExit(f"unknown mode {m} (known: {', '.join(W6_MODES)})")
    for w, path in (("W6", a.vit), ("W7", a.gpt2)):
        if any(x.startswith(w) for x in workloads) and not os.path.exists(os.path.join(path, "model.safetensors")):
            raise SystemExit(f"{path}/model.safetensors is missing: run bench_models_gpu once first "
                             f"(it writes the checkpoints), or name the directory with --{'vit' if w == 'W6' else 'gpt2'}")
    import transformers
    say(f"torch {torch.__version__}, transformers {transformers.__version__} on {torch.cuda.get_device_name()}")

    results = []

    def add(rec):
        results.append(rec)
        what = f"{rec['workload']} B{rec['batch']} {rec['dtype']} {rec['mode']}"
        if rec["error"]:
            say(f"{what}: error: {rec['error']}")
        else:
            extra = f", {rec['ms_per_token']:.4f} ms/token" if "ms_per_token" in rec else ""
            say(f"{what}: {rec['ms']:.4f} ms{extra}; first call {rec['first_call_s']:.1f} s; "
                f"peak {rec['peak_mb']:.0f} MB")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(results, f, indent=1)

    if "W6" in workloads:
        for dtype in a.dtypes.split(","):
            for batch in (int(b) for b in a.batches.split(",")):
                for mode in modes:
                    add(run_w6(a.vit, dtype, batch, mode, a.repeats, a.target_ms))
    if "W7prefill" in workloads:
        for mode in modes:
            add(run_w7_prefill(a.gpt2, mode, a.repeats, a.target_ms))
    if "W7" in workloads:
        for mode in W7_MODES:
            add(run_w7(a.gpt2, mode, a.repeats))


if __name__ == "__main__":
    main()
