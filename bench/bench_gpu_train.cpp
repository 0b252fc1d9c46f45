// W5 on one CUDA GPU: the training step of bench/w5.hpp (forward, backward, AdamW in place on
// 6 parameters and 12 moments), f32, batch 256, in Eager, Default, ReduceOverhead (CUDA
// graphs) and MaxAutotune. Timed as bench_gpu times W1-W4: CUDA events around back-to-back
// steps. The step count t stays on the device (one value: the work per step is the same).
#include "w5.hpp"

#include <cuda_runtime_api.h>

#include <kiln/backend/cuda/runtime.hpp>

namespace {
using namespace w5;

struct DeviceState {
  std::vector<kiln::Tensor<float>> t;  // x y t w1 b1 w2 b2 w3 b3, then m and v per parameter
  explicit DeviceState(const State& s) {
    for (const auto* h : {&s.xt, &s.yt, &s.tt, &s.w1t, &s.b1t, &s.w2t, &s.b2t, &s.w3t, &s.b3t, &s.mw1, &s.vw1, &s.mb1,
                          &s.vb1, &s.mw2, &s.vw2, &s.mb2, &s.vb2, &s.mw3, &s.vw3, &s.mb3, &s.vb3})
      t.push_back(h->cuda());
  }
  template <class F>
  void step(F& f) {
    auto& a = t;
    benchmark::DoNotOptimize(f(x = a[0], y = a[1], w5::t = a[2], w1 = a[3], b1 = a[4], w2 = a[5], b2 = a[6], w3 = a[7],
                               b3 = a[8], m_w1 = a[9], v_w1 = a[10], m_b1 = a[11], v_b1 = a[12], m_w2 = a[13],
                               v_w2 = a[14], m_b2 = a[15], v_b2 = a[16], m_w3 = a[17], v_w3 = a[18], m_b3 = a[19],
                               v_b3 = a[20]));
  }
};

template <bench::Mode M>
void W5(benchmark::State& bs) {
  State host;
  host.tt[0] = 1.0f;
  DeviceState s(host);
  auto f = bench::compiled<M>(w5_step());
  for (int i = 0; i < 3; ++i) s.step(f);  // plan (tune), then capture
  kiln::cuda::synchronize();
  kiln::cuda::reset_peak_memory();
  constexpr int kCalls = 10;
  cudaEvent_t e0, e1;
  KILN_CUDA_CHECK(cudaEventCreate(&e0));
  KILN_CUDA_CHECK(cudaEventCreate(&e1));
  double total = 0;
  for (auto _ : bs) {
    KILN_CUDA_CHECK(cudaEventRecord(e0, kiln::cuda::stream()));
    for (int i = 0; i < kCalls; ++i) s.step(f);
    KILN_CUDA_CHECK(cudaEventRecord(e1, kiln::cuda::stream()));
    KILN_CUDA_CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
    bs.SetIterationTime(ms / 1e3 / kCalls);
    total += ms / 1e3 / kCalls;
  }
  const double per = total / static_cast<double>(bs.iterations());
  bs.counters["GBps"] = kBytes / per / 1e9;
  bs.counters["TFLOPs"] = kFlops / per / 1e12;
  bs.counters["peak_MB"] = static_cast<double>(kiln::cuda::memory_stats().peak_bytes) / 1e6;
  if constexpr (M != bench::Mode::Eager) {
    if (std::getenv("KILN_W5_PROFILE")) {
      f.profile();
      for (int i = 0; i < 20; ++i) s.step(f);
      std::fprintf(stderr, "%s\n", f.explain().c_str());
    }
  }
  (void)cudaEventDestroy(e0);
  (void)cudaEventDestroy(e1);
}
#define KILN_W5(M) BENCHMARK(W5<bench::Mode::M>)->Name("W5/f32/" #M)->UseManualTime()->Unit(benchmark::kMillisecond);
KILN_W5(Eager)
KILN_W5(Default)
KILN_W5(ReduceOverhead)
KILN_W5(MaxAutotune)

}  // namespace

BENCHMARK_MAIN();
