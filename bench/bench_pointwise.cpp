// W1, the pointwise chain y = gelu(x*1.5 + 0.5) * sigmoid(x) + tanh(x), n = 2^24, f32; with
// the memory limits measured in the same run (STREAM copy and triad) and Eigen Tensor as the
// peer. Bytes per call: 4n read + 4n written.
#define EIGEN_USE_THREADS  // Eigen Tensor's ThreadPoolDevice
#include <cmath>

#include <unsupported/Eigen/CXX11/Tensor>
#include <unsupported/Eigen/SpecialFunctions>

#include "common.hpp"

namespace {

constexpr std::size_t kN = std::size_t{1} << 24;
constexpr auto x = kiln::input<"x", 1>();
constexpr auto w1 = kiln::gelu(x * 1.5f + 0.5f) * kiln::sigmoid(x) + kiln::tanh(x);
// Per element: mul, add, gelu, sigmoid, mul, tanh, add; a transcendental counts as one.
constexpr double kOpsPerElement = 7;

const kiln::Tensor<float>& input() {
  static const auto t = kiln::randn<float>({kN}, 1);
  return t;
}

template <bench::Mode M>
void W1(benchmark::State& state) {
  kiln::Tensor<float> out({kN});
  bench::run_kiln<M>(state, w1, out, x = input());
  bench::set_counters(state, 8.0 * kN, kOpsPerElement * kN);
}
BENCHMARK(W1<bench::Mode::Eager>)->Name("W1/kiln/Eager")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(W1<bench::Mode::Default>)->Name("W1/kiln/Default")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(W1<bench::Mode::ReduceOverhead>)->Name("W1/kiln/ReduceOverhead")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(W1<bench::Mode::MaxAutotune>)->Name("W1/kiln/MaxAutotune")->UseRealTime()->Unit(benchmark::kMillisecond);

// Eigen Tensor on a thread pool of every core: the same expression, erf-based GELU.
void W1_EigenTensor(benchmark::State& state) {
  Eigen::ThreadPool pool(kiln::cpu::max_threads());
  Eigen::ThreadPoolDevice dev(&pool, kiln::cpu::max_threads());
  Eigen::TensorMap<const Eigen::Tensor<float, 1>> xt(input().data(), static_cast<Eigen::Index>(kN));
  Eigen::Tensor<float, 1> y(static_cast<Eigen::Index>(kN));
  for (auto _ : state) {
    auto u = xt * 1.5f + 0.5f;
    y.device(dev) = 0.5f * u * (1.0f + (u * 0.70710678f).erf()) * xt.sigmoid() + xt.tanh();
    benchmark::ClobberMemory();
  }
  bench::set_counters(state, 8.0 * kN, kOpsPerElement * kN);
}
BENCHMARK(W1_EigenTensor)->Name("W1/peer/EigenTensor")->UseRealTime()->Unit(benchmark::kMillisecond);

// STREAM triad a = b + s c and copy a = b over 2^24 floats, every thread: the memory limit.
void Stream(benchmark::State& state, bool triad) {
  std::vector<float> a(kN, 0.0f), b(kN, 1.0f), c(kN, 2.0f);
  const float s = 3.0f;
  float* __restrict pa = a.data();
  const float* __restrict pb = b.data();
  const float* __restrict pc = c.data();
  for (auto _ : state) {
    if (triad) {
#pragma omp parallel for simd schedule(static)
      for (std::size_t i = 0; i < kN; ++i) pa[i] = pb[i] + s * pc[i];
    } else {
#pragma omp parallel for simd schedule(static)
      for (std::size_t i = 0; i < kN; ++i) pa[i] = pb[i];
    }
    benchmark::ClobberMemory();
  }
  bench::set_counters(state, (triad ? 12.0 : 8.0) * kN, triad ? 2.0 * kN : 0.0);
}
BENCHMARK_CAPTURE(Stream, triad, true)->Name("limit/STREAM-triad")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(Stream, copy, false)->Name("limit/STREAM-copy")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
