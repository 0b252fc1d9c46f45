// W5 on one CUDA GPU: the training step of bench/w5.hpp (forward, backward, AdamW in place on
// 6 parameters and 12 moments), f32, batch 256, in Eager, Default, ReduceOverhead (CUDA
// graphs) and MaxAutotune. Timed as bench_gpu times W1-W4 (bench::time_calls: CUDA events
// around back-to-back steps). The step count t stays on the device (one value: the work per step is the same).
#include "gpu_timing.hpp"
#include "w5.hpp"

namespace {
using namespace w5;

// The step's host state (step count 1) and its copy on the device.
struct DeviceState {
  State host;
  std::vector<kiln::Tensor<float>> t;  // x y t w1 b1 w2 b2 w3 b3, then m and v per parameter
  DeviceState() {
    host.tt[0] = 1.0f;
    const State& s = host;
    for (const auto* h : {&s.xt, &s.yt, &s.tt, &s.w1t, &s.b1t, &s.w2t, &s.b2t, &s.w3t, &s.b3t, &s.mw1, &s.vw1, &s.mb1,
                          &s.vb1, &s.mw2, &s.vw2, &s.mb2, &s.vb2, &s.mw3, &s.vw3, &s.mb3, &s.vb3})
      t.push_back(h->cuda());
  }
  template <class F>
  void step(F& f) {
    benchmark::DoNotOptimize(run(f));
  }
  template <class F>
  auto run(F& f) {
    auto& a = t;
    return (f(x = a[0], y = a[1], w5::t = a[2], w1 = a[3], b1 = a[4], w2 = a[5], b2 = a[6], w3 = a[7],
                               b3 = a[8], m_w1 = a[9], v_w1 = a[10], m_b1 = a[11], v_b1 = a[12], m_w2 = a[13],
                               v_w2 = a[14], m_b2 = a[15], v_b2 = a[16], m_w3 = a[17], v_w3 = a[18], m_b3 = a[19],
                               v_b3 = a[20]));
  }
};

template <bench::Mode M>
void W5(benchmark::State& bs) {
  DeviceState s;
  auto f = bench::compiled<M>(w5_step());
  bench::time_calls(bs, [&] { s.step(f); }, kBytes, kFlops, /*warmups=*/3);  // plan (tune), then capture
  if constexpr (M != bench::Mode::Eager) print_profile_if_asked(f, s);
}
#define KILN_W5(M) BENCHMARK(W5<bench::Mode::M>)->Name("W5/f32/" #M)->UseManualTime()->Unit(benchmark::kMillisecond);
KILN_W5(Eager)
KILN_W5(Default)
KILN_W5(ReduceOverhead)
KILN_W5(MaxAutotune)

// W5 in a training loop as users write one: every step uploads a fresh batch (a new device
// tensor) and keeps its loss (a logger's list), so no address repeats from step to step. Under
// ReduceOverhead the staged graph replays (counters: graphs captured and replayed).
template <bench::Mode M>
void W5_loop(benchmark::State& bs) {
  DeviceState s;
  auto f = bench::compiled<M>(w5_step());
  std::vector<kiln::Tensor<float>> losses;
  bench::time_calls(bs, [&] {
    s.t[0] = s.host.xt.cuda();
    auto [loss] = s.run(f);
    losses.push_back(std::move(loss));
  }, kBytes, kFlops, /*warmups=*/3);
  if constexpr (requires { f.graph_captures(); }) {
    bs.counters["captures"] = static_cast<double>(f.graph_captures());
    bs.counters["replays"] = static_cast<double>(f.graph_replays());
  }
}
#define KILN_W5_LOOP(M) \
  BENCHMARK(W5_loop<bench::Mode::M>)->Name("W5/f32/" #M "/fresh_batch_kept_loss")->UseManualTime()->Unit(benchmark::kMillisecond);
KILN_W5_LOOP(Default)
KILN_W5_LOOP(ReduceOverhead)

}  // namespace

BENCHMARK_MAIN();
