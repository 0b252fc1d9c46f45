#!/usr/bin/env python3
"""kiln's models against PyTorch on the GPU (W6 ViT-B/16, W7 GPT-2 decode and its prefill), as
a markdown section and an SVG bar chart.

  bench/report_models.py --kiln kiln_models.json --torch torch_models.json
      [--write docs/benchmarks-gpu.md] [--svg docs/benchmarks/gpu/models.svg]

--kiln: bench_models_gpu's Google Benchmark JSON (with --benchmark_repetitions, so medians);
--torch: bench/peers/torch_models.py's JSON. --write replaces the part of the file between
"<!-- models:begin -->" and "<!-- models:end -->" (appended when absent). The chart shows, for
each case, kiln's best mode beside PyTorch's best mode, as time relative to PyTorch's.
"""
import argparse
import json
import os
import sys

BEGIN, END = "<!-- models:begin -->", "<!-- models:end -->"
KILN_MODES = ("Default", "ReduceOverhead", "MaxAutotune")


def kiln_mode(policies):
    if policies in ("", "Default"):
        return "Default"
    return "ReduceOverhead" if policies.startswith("ReduceOverhead") else policies


def load_kiln(path):
    """{(workload, dtype, batch): {mode: {"ms", "first_call_s", "peak_MB"}}}, medians."""
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        parts = b["run_name"].split("/")
        workload, dtype, policies = parts[0], parts[1], parts[2]
        batch = int(parts[3]) if workload == "W6" else 1
        dtype = {"float": "f32"}.get(dtype, dtype)
        ms = b["ms_per_token"] if workload == "W7" else b["real_time"]
        out.setdefault((workload, dtype, batch), {})[kiln_mode(policies)] = {
            "ms": ms, "first_call_s": b.get("first_call_s"), "peak_MB": b.get("peak_MB")}
    return out


def load_torch(path):
    out = {}
    for r in json.load(open(path)):
        ms = r.get("ms_per_token") if r["workload"] == "W7" else r.get("ms")
        out.setdefault((r["workload"], r["dtype"], r["batch"]), {})[r["mode"]] = {
            "ms": ms, "first_call_s": r.get("first_call_s"), "peak_mb": r.get("peak_mb"), "error": r.get("error")}
    return out


def best(modes):
    ok = [(v["ms"], m) for m, v in modes.items() if v.get("ms") is not None]
    return min(ok) if ok else (None, None)


def fmt(v, digits=3):
    return "–" if v is None else f"{v:.{digits}f}"


def case_name(key):
    w, d, b = key
    return f"{w} {d}" + (f" B{b}" if w == "W6" else "")


def render(kiln, torch):
    keys = sorted(set(kiln) | set(torch), key=lambda k: (k[0], k[1], k[2]))
    torch_modes = []
    for k in keys:
        for m in torch.get(k, {}):
            if m not in torch_modes:
                torch_modes.append(m)
    lines = [
        "| case | " + " | ".join(f"kiln {m}" for m in KILN_MODES) + " | " +
        " | ".join(f"torch {m}" for m in torch_modes) + " | torch best / kiln best |",
        "|---" * (2 + len(KILN_MODES) + len(torch_modes)) + "|"]
    setup = ["| case | kiln best mode | its first call (s) | its peak memory (MB) | torch best mode | "
             "its first call (s) | its peak memory (MB) |", "|---|---|---|---|---|---|---|"]
    bars = []
    for k in keys:
        km, tm = kiln.get(k, {}), torch.get(k, {})
        kb, kbm = best(km)
        tb, tbm = best(tm)
        ratio = f"{tb / kb:.2f}x" if kb and tb else "–"
        cells = [fmt(km.get(m, {}).get("ms")) for m in KILN_MODES]
        tcells = []
        for m in torch_modes:
            r = tm.get(m)
            tcells.append("–" if r is None else "failed" if r.get("ms") is None else fmt(r["ms"]))
        lines.append(f"| {case_name(k)} | " + " | ".join(cells) + " | " + " | ".join(tcells) + f" | {ratio} |")
        kr, tr = km.get(kbm, {}), tm.get(tbm, {})
        setup.append(f"| {case_name(k)} | {kbm or '–'} | {fmt(kr.get('first_call_s'), 2)} | "
                     f"{fmt(kr.get('peak_MB'), 0)} | {tbm or '–'} | {fmt(tr.get('first_call_s'), 2)} | "
                     f"{fmt(tr.get('peak_mb'), 0)} |")
        if kb and tb:
            bars.append((case_name(k), kb, kbm, tb, tbm))
    errors = [f"- torch {case_name(k)} {m}: {r['error']}" for k in keys for m, r in torch.get(k, {}).items()
              if r.get("error")]
    return lines, setup, errors, bars


def svg(bars):
    """Horizontal bars: PyTorch's best = 1, kiln's best relative to it."""
    row, left, width = 34, 150, 420
    top = 40
    height = top + row * len(bars) + 30
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 120}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           f'<text x="{left}" y="20">time relative to PyTorch\'s best mode (shorter is faster)</text>']
    for i, (name, kb, kbm, tb, tbm) in enumerate(bars):
        y = top + i * row
        scale = width / max(1.0, kb / tb)
        out.append(f'<text x="{left - 8}" y="{y + 14}" text-anchor="end">{name}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{scale:.1f}" height="12" fill="#bbbbbb"/>')
        out.append(f'<text x="{left + scale + 4:.1f}" y="{y + 10}">torch {tbm} {tb:.3f} ms</text>')
        w = scale * kb / tb
        out.append(f'<rect x="{left}" y="{y + 14}" width="{w:.1f}" height="12" fill="#d9534f"/>')
        out.append(f'<text x="{left + w + 4:.1f}" y="{y + 24}">kiln {kbm} {kb:.3f} ms</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kiln", required=True)
    p.add_argument("--torch", required=True)
    p.add_argument("--write")
    p.add_argument("--svg")
    p.add_argument("--device", default="", help="the GPU's name, for the section's first line")
    a = p.parse_args()
    kiln = load_kiln(a.kiln)
    torch = load_torch(a.torch) if os.path.exists(a.torch) else {}
    lines, setup, errors, bars = render(kiln, torch)
    text = [BEGIN, "",
            f"ms per call (W7: per new token, the prompt included), medians, one run{' on ' + a.device if a.device else ''}."
            " kiln's times are wall-clock, from the call to the device's finishing it (W7: the tokens on the host);"
            " PyTorch's are CUDA-event times of back-to-back calls, which hide the host's time where it overlaps the device's."
            " Written by `scripts/bench_models_gpu.sh`.", ""] + lines + ["", "First call and memory of each side's best mode:", ""] + setup
    if errors:
        text += ["", "PyTorch's failures:", ""] + errors
    if a.svg and bars:
        os.makedirs(os.path.dirname(a.svg) or ".", exist_ok=True)
        open(a.svg, "w").write(svg(bars))
        text += ["", f"![kiln against PyTorch, models]({os.path.relpath(a.svg, os.path.dirname(a.write or '.') or '.')})"]
    text += ["", END]
    section = "\n".join(text) + "\n"
    print(section)
    if a.write:
        doc = open(a.write).read() if os.path.exists(a.write) else ""
        if BEGIN in doc and END in doc:
            doc = doc[:doc.index(BEGIN)] + section.rstrip("\n") + doc[doc.index(END) + len(END):]
        else:
            doc = doc.rstrip("\n") + "\n\n" + section
        open(a.write, "w").write(doc)


if __name__ == "__main__":
    sys.exit(main())
