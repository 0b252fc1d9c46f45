#!/usr/bin/env python3
"""PyTorch on the CPU, the peer of W5 (docs/benchmarks.md): an MLP 784-1024-1024-10 with ReLU,
cross-entropy and AdamW(lr=1e-3), batch 256, f32; one step is zero_grad, forward, backward and
optimizer.step(). And of bench_rows' attention: softmax(q @ k^T * 0.125) @ v for q, k, v
[1, 12, 512, 64], f32, as written without fused attention (torch 1.13 has none); and of its
AttnGrad, the char-GPT's causal attention [32, 4, 64, 32] with the gradients of q, k and v.
Threads: as many as the machine has (torch.set_num_threads), like kiln; OpenBLAS's own threads
off (OPENBLAS_NUM_THREADS=1 unless set, before torch loads the system BLAS), torch's fastest
setting on a machine where OpenBLAS is the system BLAS (W5 on 2 cores: 26.6 ms a step, against
56.7 ms with OpenBLAS's threads on as well, which oversubscribe the cores).

Writes Google Benchmark's JSON layout, so bench/report.py puts the figure next to kiln's:
  bench/peers/torch_cpu.py OUT.json      (scripts/bench.sh runs it when torch is installed)
Timing: 3 repetitions of back-to-back steps for at least 0.5 s each; the median is reported.
"""
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before torch loads the system BLAS (see above)

import torch  # noqa: E402


def w5():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
        torch.nn.Linear(1024, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(256, 784)
    labels = torch.tensor([(i * 7) % 10 for i in range(256)])

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), labels)
        loss.backward()
        opt.step()
        return loss

    return step


def time_ms(fn, min_time=0.5, repetitions=3):
    for _ in range(3):
        fn()  # warm-up
    runs = []
    for _ in range(repetitions):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        runs.append(1e3 * elapsed / n)
    return statistics.median(runs)


# The counters kiln's W5 reports (bench/bench_train.cpp): GEMM flops per step, and the minimum
# traffic (the batch, and each parameter and its two moments read and written).
B, I, H, O = 256, 784, 1024, 10
FORWARD = 2.0 * B * (I * H + H * H + H * O)
FLOPS = 2 * FORWARD + 2.0 * B * (H * H + H * O)
PARAMS = I * H + H + H * H + H + H * O + O
BYTES = 4.0 * (B * (I + 1) + 6 * PARAMS)


def attention():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 12, 512, 64) for _ in range(3))

    def call():
        with torch.no_grad():
            return torch.softmax(q @ k.transpose(-2, -1) * 0.125, dim=-1) @ v

    return call


ATTN_FLOPS = 4.0 * 12 * 512 * 512 * 64
ATTN_BYTES = 16.0 * 12 * 512 * 64


def attention_grad():
    # bench_rows' AttnGrad: the char-GPT's causal attention [32, 4, 64, 32], forward and the
    # gradients of q, k and v for a cotangent g, through autograd.
    torch.manual_seed(0)
    q, k, v = (torch.randn(32, 4, 64, 32, requires_grad=True) for _ in range(3))
    g = torch.randn(32, 4, 64, 32)
    mask = torch.ones(64, 64, dtype=torch.bool).tril()

    def call():
        s = (q @ k.transpose(-2, -1)) * 32 ** -0.5
        y = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
        return torch.autograd.grad(y, (q, k, v), g)

    return call


GRAD_FLOPS = 14.0 * 32 * 4 * 64 * 64 * 32
GRAD_BYTES = 4.0 * 8 * 32 * 4 * 64 * 32


def entry(name, ms, flops, nbytes):
    return {"name": name, "run_name": name, "run_type": "iteration", "real_time": ms, "time_unit": "ms",
            "flop/s": flops / (ms * 1e-3), "bytes_per_second": nbytes / (ms * 1e-3)}


def main():
    out = sys.argv[1]
    torch.set_num_threads(os.cpu_count())
    w5_ms, attn_ms, grad_ms = time_ms(w5()), time_ms(attention()), time_ms(attention_grad())
    result = {
        "context": {"library": f"torch {torch.__version__}", "threads": torch.get_num_threads()},
        "benchmarks": [entry("W5/peer/PyTorch", w5_ms, FLOPS, BYTES),
                       entry("Attn/peer/PyTorch", attn_ms, ATTN_FLOPS, ATTN_BYTES),
                       entry("AttnGrad/peer/PyTorch", grad_ms, GRAD_FLOPS, GRAD_BYTES)],
    }
    json.dump(result, open(out, "w"), indent=1)
    print(f"W5/peer/PyTorch (torch {torch.__version__}, {torch.get_num_threads()} threads): {w5_ms:.2f} ms per step")
    print(f"Attn/peer/PyTorch: {attn_ms:.3f} ms per call")
    print(f"AttnGrad/peer/PyTorch: {grad_ms:.3f} ms per call")


if __name__ == "__main__":
    main()
