#!/usr/bin/env python3
"""Turns one GPU run into a markdown section: kiln's Google Benchmark JSON next to PyTorch's
(bench/peers/torch_workloads.py --json), one row per workload, batch and dtype.

Usage:
  bench/report_gpu.py --kiln KILN.json --torch TORCH.json [--write docs/benchmarks-gpu.md]
Prints the markdown to stdout; with --write also writes it to that file, replacing it up to the
heading KEPT_HEADING (the page's hand-written part, which is kept as it is).

kiln's benchmarks are named workload[/B<batch>]/dtype/mode (W1/f32/Eager, W4/B4096/bf16/MaxAutotune,
W5/f32/Default; modes Eager, Default, ReduceOverhead, MaxAutotune), with the time in real_time
(unit time_unit) and the user counters GBps, TFLOPs and peak_MB, each of which may be absent.
Copy/f32's GBps is the copy ceiling; Copy/<workload>/<dtype> is a copy moving that workload's bytes
(read + written), the ceiling at that size. Of aggregates only the median is used; repetitions without
aggregates are reduced to their median here.
"""
import argparse
import json
import re
import statistics
import sys

KILN_MODES = ("Eager", "Default", "ReduceOverhead", "MaxAutotune")
TORCH_MODES = ("eager", "compile", "reduce-overhead", "max-autotune")
BANDWIDTH_WORKLOADS = ("W1", "W2", "W3", "SoftmaxLong", "EmbBwd")  # SoftmaxLong: kiln only (bench_gpu.cpp)
FIXED_BATCH = ("W5",)  # one batch only: a batch in the name is dropped, so both sides match
UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
DASH = "–"
KEPT_HEADING = "## Running the GPU benchmarks"

# Suffixes Google Benchmark appends to a name.
GB_SUFFIX = re.compile(r"^(manual_time|real_time|process_time|iterations:\d+|repeats:\d+|"
                       r"threads:\d+|min_time:[\d.]+s?|min_warmup_time:[\d.]+s?)$")


def parse_name(name):
    """'W4/B256/bf16/Eager/manual_time' -> ('W4', 256, 'bf16', 'Eager'); None if not of that form."""
    parts = [p for p in name.split("/") if not GB_SUFFIX.match(p)]
    # A benchmark registered with ->Arg(B) carries the argument as a last segment: drop it.
    if len(parts) == 5 and re.fullmatch(r"B\d+", parts[1]) and parts[4] == parts[1][1:]:
        parts = parts[:4]
    if parts and parts[0] == "Copy":  # Copy/f32, or Copy/W2/bf16: the workload in the mode's place
        if len(parts) == 3:
            return ("Copy", None, parts[2], parts[1])
        return ("Copy", None, parts[1] if len(parts) > 1 else "f32", None)
    if len(parts) == 4 and re.fullmatch(r"B\d+", parts[1]):
        workload, batch, dtype, mode = parts[0], int(parts[1][1:]), parts[2], parts[3]
    elif len(parts) == 3:
        (workload, dtype, mode), batch = parts, None
    else:
        return None
    if workload in FIXED_BATCH:
        batch = None
    return workload, batch, dtype, mode


def load_kiln(path):
    """{(workload, batch, dtype, mode): {"ms", "gbps", "tflops", "peak_mb", "error"}} and context."""
    data = json.load(open(path))
    runs, medians = {}, {}
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") not in (None, "median"):
            continue
        name = b.get("run_name") or b["name"]
        if b.get("aggregate_name") == "median":
            name = re.sub(r"_median$", "", name)
        key = parse_name(name)
        if key is None:
            print(f"report_gpu: skipping benchmark {b['name']!r}", file=sys.stderr)
            continue
        rec = {
            "ms": b["real_time"] * UNIT_MS[b.get("time_unit", "ns")] if "real_time" in b else None,
            "gbps": b.get("GBps"),
            "tflops": b.get("TFLOPs"),
            "peak_mb": b.get("peak_MB"),
            "error": b.get("error_message") if b.get("error_occurred") else None,
        }
        if rec["error"]:
            rec["ms"] = None
        if b.get("aggregate_name") == "median":
            medians[key] = rec
        else:
            runs.setdefault(key, []).append(rec)
    out = dict(medians)
    for key, recs in runs.items():
        if key in out:
            continue
        if len(recs) == 1:
            out[key] = recs[0]
            continue
        ok = [r for r in recs if r["ms"] is not None]
        if not ok:
            out[key] = recs[0]
            continue
        merged = {"error": None}
        for field in ("ms", "gbps", "tflops", "peak_mb"):
            vals = [r[field] for r in ok if r[field] is not None]
            merged[field] = statistics.median(vals) if vals else None
        out[key] = merged
    return out, data.get("context", {})


def load_torch(path):
    """{(workload, batch, dtype): {mode: record}} and the copy record."""
    out, copy = {}, None
    for r in json.load(open(path)):
        if r.get("workload") == "copy":
            copy = r
            continue
        batch = None if r["workload"] in FIXED_BATCH else r.get("batch")
        out.setdefault((r["workload"], batch, r["dtype"]), {})[r["mode"]] = r
    return out, copy


def row_order(key):
    workload, batch, dtype = key
    m = re.fullmatch(r"W(\d+)", workload)
    return (int(m.group(1)) if m else 1 << 30, workload,
            {"f32": 0, "bf16": 1}.get(dtype, 2), dtype, -1 if batch is None else batch)


def f_ms(v):
    return DASH if v is None else (f"{v:.4f}" if v < 1 else f"{v:.3f}")


def f_num(v, digits=0):
    return DASH if v is None else f"{v:.{digits}f}"


def render(kiln, ctx, torch, copy_torch):
    kiln_copy = kiln.get(("Copy", None, "f32", None), {}).get("gbps")
    keys = {(w, b, d) for (w, b, d, m) in kiln if w != "Copy"} | set(torch)
    lines = []
    lines.append("## GPU: kiln and PyTorch")
    lines.append("")
    lines.append("The tables down to the section on running the benchmarks come from one run on one machine, made by "
                 "`bash scripts/bench_gpu.sh`: kiln's GPU benchmarks and PyTorch "
                 "(`bench/peers/torch_workloads.py`) back to back. Times are ms per call, the "
                 "median of repeats of back-to-back calls between CUDA events.")
    lines.append("")
    machine = []
    if copy_torch and copy_torch.get("device"):
        machine.append(f"GPU: {copy_torch['device']}")
    if copy_torch and copy_torch.get("torch"):
        machine.append(f"PyTorch {copy_torch['torch']}")
    if ctx.get("host_name"):
        machine.append(f"host {ctx['host_name']}")
    if ctx.get("date"):
        machine.append(f"run {ctx['date']}")
    if machine:
        lines.append("; ".join(machine) + ".")
        lines.append("")
    ceilings = []
    if kiln_copy:
        ceilings.append(f"{kiln_copy:.0f} GB/s measured by kiln (`Copy/f32`)")
    if copy_torch and copy_torch.get("gbps"):
        n = copy_torch.get("n")
        size = f", 2^{n.bit_length() - 1} f32" if isinstance(n, int) and n > 0 and n & (n - 1) == 0 else ""
        ceilings.append(f"{copy_torch['gbps']:.0f} GB/s measured by PyTorch (`y.copy_(x)`{size})")
    lines.append("Copy ceiling, device to device, bytes read + written: "
                 + ("; ".join(ceilings) if ceilings else DASH) + ". "
                 "The % column is kiln's best mode's bandwidth over kiln's own copy ceiling; the "
                 "same-size column over a copy of that workload's bytes (`Copy/<workload>/<dtype>`, "
                 "as many bytes read and written as the workload moves), timed the same way in "
                 "the same run: what a kernel of that size reaches.")
    lines.append("")
    lines.append("| workload | dtype | kiln Eager | kiln Default | kiln ReduceOverhead | kiln MaxAutotune "
                 "| PyTorch best (mode) | PyTorch best / kiln best | kiln best GB/s | % of copy "
                 "| % of same-size copy | kiln best TFLOP/s | peak MB kiln / PyTorch |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []
    for key in sorted(keys, key=row_order):
        workload, batch, dtype = key
        label = workload + (f" B={batch}" if batch is not None else "")
        k_modes = {m: kiln.get((workload, batch, dtype, m)) for m in KILN_MODES}
        cells = []
        for m in KILN_MODES:
            r = k_modes[m]
            if r is None:
                cells.append(DASH)
            elif r["ms"] is None:
                cells.append("error")
                notes.append(f"kiln {label} {dtype} {m}: {r.get('error') or 'no time'}")
            else:
                cells.append(f_ms(r["ms"]))
        k_ok = [(r["ms"], m, r) for m, r in k_modes.items() if r and r["ms"] is not None]
        k_best = min(k_ok, key=lambda t: t[0]) if k_ok else None

        t_modes = torch.get(key, {})
        t_ok = [(r["ms"], m, r) for m, r in t_modes.items() if r.get("ms") is not None]
        t_best = min(t_ok, key=lambda t: t[0]) if t_ok else None
        for m in TORCH_MODES:
            r = t_modes.get(m)
            if r is not None and r.get("ms") is None:
                notes.append(f"PyTorch {label} {dtype} {m}: {r.get('error') or 'no time'}")

        t_cell = f"{f_ms(t_best[0])} ({t_best[1]})" if t_best else DASH
        ratio = f"{t_best[0] / k_best[0]:.2f}x" if t_best and k_best else DASH
        gbps = pct = pct_same = tflops = DASH
        if k_best:
            r = k_best[2]
            if workload in BANDWIDTH_WORKLOADS and r.get("gbps") is not None:
                gbps = f_num(r["gbps"])
                if kiln_copy:
                    pct = f"{100 * r['gbps'] / kiln_copy:.0f}%"
                same = kiln.get(("Copy", None, dtype, workload), {}).get("gbps")
                if same:
                    pct_same = f"{100 * r['gbps'] / same:.0f}% ({same:.0f} GB/s)"
            if r.get("tflops") is not None:
                tflops = f_num(r["tflops"], 1)
        k_peak = f_num(k_best[2].get("peak_mb")) if k_best else DASH
        t_peak = f_num(t_best[2].get("peak_mb")) if t_best else DASH
        lines.append(f"| {label} | {dtype} | " + " | ".join(cells) + f" | {t_cell} | {ratio} | "
                     f"{gbps} | {pct} | {pct_same} | {tflops} | {k_peak} / {t_peak} |")
    lines.append("")
    lines.append("- PyTorch best is the fastest of the modes it ran (eager, torch.compile's default "
                 "mode as `compile`, `reduce-overhead`, and `max-autotune` when asked); the ratio "
                 "is that time over kiln's fastest mode, so above 1 means kiln is faster.")
    lines.append("- Peak MB: each side's peak device memory in its best mode (kiln's `peak_MB` "
                 "counter; PyTorch's `torch.cuda.max_memory_allocated` over the timed calls).")
    lines.append(f"- {DASH}: not measured in this run (or no such counter).")

    # Every PyTorch mode, so the best-of column can be checked.
    if torch:
        lines.append("")
        lines.append("PyTorch, every mode (ms per call):")
        lines.append("")
        lines.append("| workload | dtype | " + " | ".join(TORCH_MODES) + " |")
        lines.append("|---|---|" + "---|" * len(TORCH_MODES))
        for key in sorted(torch, key=row_order):
            workload, batch, dtype = key
            label = workload + (f" B={batch}" if batch is not None else "")
            cells = []
            for m in TORCH_MODES:
                r = torch[key].get(m)
                cells.append(DASH if r is None else ("error" if r.get("ms") is None else f_ms(r["ms"])))
            lines.append(f"| {label} | {dtype} | " + " | ".join(cells) + " |")
    if notes:
        lines.append("")
        lines.append("Errors in this run:")
        lines.append("")
        for n in notes:
            lines.append(f"- {n.replace('|', '/')}")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description="kiln vs PyTorch on the GPU, as markdown")
    p.add_argument("--kiln", help="kiln's Google Benchmark JSON")
    p.add_argument("--torch", help="bench/peers/torch_workloads.py's JSON")
    p.add_argument("--write", help="also write the markdown to this file, keeping its hand-written part")
    a = p.parse_args()
    if not a.kiln and not a.torch:
        p.error("give --kiln, --torch or both")
    kiln, ctx = load_kiln(a.kiln) if a.kiln else ({}, {})
    torch, copy_torch = load_torch(a.torch) if a.torch else ({}, None)
    md = render(kiln, ctx, torch, copy_torch)
    sys.stdout.write(md)
    if a.write:
        kept = ""
        try:
            old = open(a.write).read()
            at = old.find("\n" + KEPT_HEADING)
            if at >= 0:
                kept = "\n" + old[at + 1:]
        except OSError:
            pass
        with open(a.write, "w") as f:
            f.write(md + kept)


if __name__ == "__main__":
    main()
