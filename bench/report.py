#!/usr/bin/env python3
"""Turns the bench binaries' Google Benchmark JSON into DOCS/benchmarks.md: per workload, a
table of times and ratios (kiln vs its eager baseline, vs the peer, vs the machine limit
measured in the same run) and a PNG bar chart in DOCS/benchmarks/.

Usage: bench/report.py DOCS RESULT.json [RESULT.json ...]   (scripts/bench.sh runs it)
"""
import json
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


KEPT_HEADING = "## Against an earlier release"
PREAMBLE = """# Benchmarks

Written by `scripts/bench.sh`, which builds `bench/` (Google Benchmark), runs each binary with
3 repetitions of at least 0.5 s (the median is shown) and calls `bench/report.py`. Every row of
one workload comes from the same run of the same binary, so the ratios hold on a noisy machine.

- kiln Eager: one kernel per node (`kiln::eager`), fresh outputs per call.
- kiln Default: `kiln::compile(y)`, fresh outputs per call.
- kiln ReduceOverhead and MaxAutotune: `f.into(out, ...)`, outputs reused.
- Peers: Eigen Tensor on a thread pool of every core (W1); hand-written Eigen loops over rows
  with OpenMP (W2, W3); Eigen dense products plus a bias and GELU pass (W4); PyTorch on the
  CPU (W5, `bench/peers/torch_cpu.py`, Debian's python3-torch, every core), when installed.
- W5 is one training step (forward, backward, AdamW update of 6 parameters and 12 moments, in
  place); its GFLOP/s count the GEMMs only (2.45 GFLOP per step).
- Limits: STREAM triad and copy over 3 x 2^24 floats with OpenMP, and Eigen's SGEMM at 2048^3.
- Bytes are the minimum traffic (inputs read once, outputs written once). W2 and W3's data
  (38 MB and 34 MB) fit in the benchmark machine's last-level cache, so they can pass the DRAM-bound
  STREAM figures. Ops count one per evaluator node per element, a transcendental as one.

## Workloads

The same definitions are used by kiln and by each peer, on the CPU (`scripts/bench.sh`, this
page) and on the GPU (`scripts/bench_gpu.sh`, [benchmarks-gpu.md](benchmarks-gpu.md)). Every
comparison is a ratio measured side by side in one run, on one machine.

| id | workload | expression and sizes |
|---|---|---|
| W1 | pointwise chain | `gelu(x * 1.5 + 0.5) * sigmoid(x) + tanh(x)`; n = 2^24 on the CPU, 2^26 on the GPU; f32 (and bf16 on the GPU) |
| W2 | add + layer norm | `layer_norm(x + r, gamma, beta, 1e-5)` over the last axis; x, r [4096, 768] on the CPU, [16384, 768] on the GPU |
| W3 | scaled softmax | `softmax(s * 0.125)` over the last axis; s [4096, 1024] on the CPU, [16384, 1024] on the GPU |
| W4 | transformer FFN | `gelu(x @ W1 + b1) @ W2 + b2` with W1 [768, 3072], W2 [3072, 768]; batch B of 1, 16, 256 (and 4096 on the GPU); f32 (and bf16 on the GPU) |
| W5 | training step | MLP 784-1024-1024-10 with ReLU, cross-entropy on class labels, AdamW (lr 1e-3); batch 256; f32; one step is forward, backward and the update of every parameter and moment |
| W6 | ViT-B/16 inference | the ViT-Base/16 image classifier (224 x 224 input, 16 x 16 patches, 12 pre-norm layers, hidden 768, 12 heads, MLP 3072, exact gelu); batch 1, 16, 64; f32 and bf16. Defined for later releases: kiln has no convolution or attention op yet |
| W7 | GPT-2 decode | GPT-2 small (12 layers, hidden 768, 12 heads, vocabulary 50257), bf16, batch 1, a 32-token prompt and 64 greedy new tokens with a static KV cache, reported per new token. Defined for later releases, as W6 |

Peers: on the CPU, Eigen (W1-W4) and PyTorch on the CPU (W5); on the GPU, PyTorch in eager
mode, torch.compile's default mode, reduce-overhead and, on request, max-autotune, the best of
them taken per workload. Hardware of the published runs: the CPU tables come from a 2-core
x86-64 virtual machine (AVX-512), the GPU tables from one NVIDIA H200 with PyTorch 2.11; each
page names its machine and date.

"""


def load(paths):
    rows, context = [], None
    for p in paths:
        data = json.load(open(p))
        context = context or data["context"]
        for b in data["benchmarks"]:
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            name = re.sub(r"/real_time(_median)?$", "", b["run_name"] if "run_name" in b else b["name"])
            rows.append({
                "name": name,
                "ms": b["real_time"] * {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]],
                "bytes_per_second": b.get("bytes_per_second", 0.0),
                "flops": b.get("flop/s", 0.0),
            })
    return rows, context


def main():
    docs, paths = sys.argv[1], sys.argv[2:]
    out_dir = os.path.join(docs, "benchmarks")
    rows, ctx = load(paths)
    by_name = {r["name"]: r for r in rows}
    triad = by_name.get("limit/STREAM-triad", {}).get("bytes_per_second", 0.0)
    sgemm = by_name.get("limit/EigenSGEMM-2048", {}).get("flops", 0.0)

    # Group: workload[/size] -> {variant: row}; names are W/kiln/Mode[/size] or W/peer/Name[/size].
    groups = defaultdict(dict)
    for r in rows:
        parts = r["name"].split("/")
        if parts[0] == "limit":
            continue
        workload = parts[0] + (f" B={parts[3]}" if len(parts) > 3 else "")
        groups[workload][f"{parts[1]} {parts[2]}"] = r

    lines = []
    lines.append("| workload | variant | time (ms) | GB/s | GFLOP/s | vs kiln Eager | vs peer | vs limit |")
    lines.append("|---|---|---|---|---|---|---|---|")
    os.makedirs(out_dir, exist_ok=True)
    charts = []
    for workload in sorted(groups):
        variants = groups[workload]
        eager = variants.get("kiln Eager")
        peer = next((v for k, v in variants.items() if k.startswith("peer")), None)
        for name in sorted(variants, key=lambda k: (k.startswith("peer"), k)):
            r = variants[name]
            vs_eager = f"{eager['ms'] / r['ms']:.2f}x" if eager and name.startswith("kiln") else ""
            vs_peer = f"{peer['ms'] / r['ms']:.2f}x" if peer and name.startswith("kiln") else ""
            if workload.startswith("W4") or workload.startswith("W5"):
                limit = f"{100 * r['flops'] / sgemm:.0f}% of SGEMM rate" if sgemm else ""
            else:
                limit = f"{100 * r['bytes_per_second'] / triad:.0f}% of triad" if triad else ""
            lines.append(f"| {workload} | {name} | {r['ms']:.3f} | {r['bytes_per_second'] / 1e9:.1f} | "
                         f"{r['flops'] / 1e9:.1f} | {vs_eager} | {vs_peer} | {limit} |")
        fig, ax = plt.subplots(figsize=(6, 0.45 * len(variants) + 1))
        names = sorted(variants, key=lambda k: (k.startswith("peer"), k))
        ax.barh(names, [variants[n]["ms"] for n in names],
                color=["#c0392b" if n.startswith("peer") else "#2c7fb8" for n in names])
        ax.invert_yaxis()
        ax.set_xlabel("ms per call (lower is better)")
        ax.set_title(workload)
        fig.tight_layout()
        png = re.sub(r"[^A-Za-z0-9]+", "_", workload).strip("_") + ".png"
        fig.savefig(os.path.join(out_dir, png), dpi=80)
        plt.close(fig)
        charts.append((workload, png))

    limits = []
    for key, label in (("limit/STREAM-triad", "STREAM triad"), ("limit/STREAM-copy", "STREAM copy")):
        if key in by_name:
            limits.append(f"- {label}: {by_name[key]['bytes_per_second'] / 1e9:.1f} GB/s")
    if sgemm:
        limits.append(f"- Eigen SGEMM 2048^3: {sgemm / 1e9:.0f} GFLOP/s")

    md = os.path.join(docs, "benchmarks.md")
    # The sections after the generated tables (from KEPT_HEADING on) are written by hand from
    # other commands (scripts/bench_ab.sh); they are kept.
    kept = ""
    if os.path.exists(md):
        text = open(md).read()
        at = text.find(KEPT_HEADING)
        kept = text[at:] if at >= 0 else ""
    with open(md, "w") as f:
        f.write(PREAMBLE)
        f.write(f"Machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
                f"{ctx.get('mhz_per_cpu', '?')} MHz; run {ctx.get('date', '?')}.\n\n")
        f.write("Limits measured in the same run:\n\n" + "\n".join(limits) + "\n\n")
        f.write("\n".join(lines) + "\n\n")
        for workload, png in charts:
            f.write(f"![{workload}](benchmarks/{png})\n")
        if kept:
            f.write("\n" + kept)
    print(open(md).read())


if __name__ == "__main__":
    main()
