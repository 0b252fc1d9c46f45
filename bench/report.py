#!/usr/bin/env python3
"""Turns the bench binaries' Google Benchmark JSON into docs/benchmarks.md: per workload, a
table of times and ratios (kiln vs its eager baseline, vs the peer, vs the machine limit
measured in the same run) and a PNG bar chart.

Usage: bench/report.py OUT_DIR RESULT.json [RESULT.json ...]
"""
import json
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
    out_dir, paths = sys.argv[1], sys.argv[2:]
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
            if workload.startswith("W4"):
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

    md = os.path.join(out_dir, "results.md")
    with open(md, "w") as f:
        f.write(f"Machine: {ctx.get('host_name', '?')}, {ctx.get('num_cpus', '?')} CPUs at "
                f"{ctx.get('mhz_per_cpu', '?')} MHz; run {ctx.get('date', '?')}.\n\n")
        f.write("Limits measured in the same run:\n\n" + "\n".join(limits) + "\n\n")
        f.write("\n".join(lines) + "\n\n")
        for workload, png in charts:
            f.write(f"![{workload}](benchmarks/{png})\n")
    print(open(md).read())


if __name__ == "__main__":
    main()
