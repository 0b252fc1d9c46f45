// kiln benchmarks on a CUDA GPU: timing as the PyTorch peer (bench/peers/torch_workloads.py)
// does it, CUDA events around kCalls back-to-back calls, the time per call reported as manual
// time. Shared by bench_gpu (W1-W4) and bench_gpu_train (W5).
#pragma once
#include <chrono>

#include <kiln/backend/cuda/runtime.hpp>

#include "common.hpp"

namespace bench {

inline constexpr int kCalls = 10;

// Runs `call` `warmups` times (the first call plans and tunes; under ReduceOverhead the second
// captures its graph), then kCalls times between two events per benchmark iteration. Counters:
// GBps and TFLOPs from the bytes and flops of one call, peak_MB from kiln's allocator, host_us
// the host's time per call to enqueue it (wall clock around the kCalls calls, no
// synchronization inside): where it is near the manual time, the call is host-bound.
template <class Call>
void time_calls(benchmark::State& state, Call&& call, double bytes, double flops, int warmups = 2) {
  for (int i = 0; i < warmups; ++i) call();
  kiln::cuda::synchronize();
  kiln::cuda::reset_peak_memory();
  const kiln::cuda::Event e0, e1;
  cudaStream_t s = kiln::cuda::stream();
  double total_ms = 0, host_s = 0;
  for (auto _ : state) {
    KILN_CUDA_CHECK(cudaEventRecord(e0, s));
    const auto h0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) call();
    host_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count();
    KILN_CUDA_CHECK(cudaEventRecord(e1, s));
    const double ms = e1.since(e0) / kCalls;
    state.SetIterationTime(ms / 1e3);
    total_ms += ms;
  }
  const double per_call_s = total_ms / 1e3 / static_cast<double>(state.iterations());
  state.counters["GBps"] = bytes / per_call_s / 1e9;
  if (flops > 0) state.counters["TFLOPs"] = flops / per_call_s / 1e12;
  state.counters["host_us"] = host_s * 1e6 / kCalls / static_cast<double>(state.iterations());
  state.counters["peak_MB"] = static_cast<double>(kiln::cuda::memory_stats().peak_bytes) / 1e6;
}

}  // namespace bench
