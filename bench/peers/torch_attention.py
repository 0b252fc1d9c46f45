#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the GPU, per backend: the peer of bench_gpu's
attention cases (docs/benchmarks-gpu.md, "Attention"). bf16, H = 12, D = 64:

  AttnFwd     B = 8, S = 1024, causal: the forward
  AttnFwdBwd  the same, forward and backward (out.backward(g), q, k and v requiring grad)
  AttnDecode  one query token against a cache of L positions, (B, L) in (1, 2048), (1, 32768),
              (8, 8192); no mask (the one query sees the whole cache, as kiln's causal decode)

Backends: cudnn, flash, efficient (torch.nn.attention.sdpa_kernel), each where it supports the
case. Method as bench/peers/torch_workloads.py: 3 warm-up calls, then 7 repeats of k
back-to-back calls between two CUDA events (k so that a repeat lasts about 20 ms, at most
1000); the time per call is the median over the repeats.

Usage: bench/peers/torch_attention.py [--json OUT.json]
Output: a line per case, and with --json a list of
  {"workload": "AttnFwd", "backend": "cudnn", "batch": 8, "len": 1024, "ms": float or null,
   "error": str or null}
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_workloads import time_calls  # the same timing as the other GPU peers

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}
H, D = 12, 64


def randn(shape, grad=False):
    return torch.randn(shape, device="cuda", dtype=torch.float32).to(torch.bfloat16).requires_grad_(grad)


def case(workload, batch, length):
    torch.manual_seed(0)
    if workload == "AttnDecode":
        q, k, v = randn((batch, H, 1, D)), randn((batch, H, length, D)), randn((batch, H, length, D))
        return lambda: F.scaled_dot_product_attention(q, k, v)
    grad = workload == "AttnFwdBwd"
    q, k, v = (randn((batch, H, length, D), grad) for _ in range(3))
    if not grad:
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)
    g = randn((batch, H, length, D))

    def step():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out.backward(g)
        return out
    return step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json")
    a = p.parse_args()
    cases = [("AttnFwd", 8, 1024), ("AttnFwdBwd", 8, 1024), ("AttnDecode", 1, 2048), ("AttnDecode", 1, 32768),
             ("AttnDecode", 8, 8192)]
    results = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}", flush=True)
    for workload, batch, length in cases:
        for name, backend in BACKENDS.items():
            rec = {"workload": workload, "backend": name, "batch": batch, "len": length, "ms": None, "error": None}
            try:
                with sdpa_kernel(backend):
                    call = case(workload, batch, length)
                    for _ in range(3):  # warm-up
                        call()
                    rec["ms"], _ = time_calls(call, repeats=7, target_ms=20)
            except Exception as e:  # a backend that does not take the case
                rec["error"] = " ".join(f"{type(e).__name__}: {e}".split())[:160]
            results.append(rec)
            shown = f"{rec['ms']:.4f} ms" if rec["ms"] is not None else rec["error"]
            print(f"{workload}/B{batch}/L{length} {name}: {shown}", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
