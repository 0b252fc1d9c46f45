// kiln on one CUDA GPU: W1-W5 at WORKLOADS.md's GPU sizes, f32, in Eager, Default,
// ReduceOverhead (CUDA graphs) and MaxAutotune, plus the device-to-device copy that sets the
// bandwidth ceiling in the same run. Timed by bench::time_calls (gpu_timing.hpp; use
// --benchmark_repetitions and the median). Counters: GBps (the fewest bytes the workload must
// move, over the time), TFLOPs, peak_MB (kiln's allocator, the inputs and outputs included).
// Run by scripts/bench_gpu.sh.
#include <cstdio>
#include <cstdlib>
#include <tuple>

#include "gpu_timing.hpp"

namespace {

// Eager and Default return fresh outputs (from the caching allocator); ReduceOverhead and
// MaxAutotune write into the caller's output.
template <bench::Mode M, class Expr, class... Bs>
void run(benchmark::State& state, const Expr& e, const kiln::Shape& out_shape, double bytes, double flops, const Bs&... bs) {
  auto f = bench::compiled<M>(e);
  kiln::Tensor<float> out(out_shape, kiln::Device::cuda());
  bench::time_calls(state, [&] {
    if constexpr (M == bench::Mode::Eager || M == bench::Mode::Default) benchmark::DoNotOptimize(f(bs...));
    else f.into(out, bs...);
  }, bytes, flops);
}

void Copy(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << 28;
  kiln::Tensor<float> a({n}, kiln::Device::cuda()), b({n}, kiln::Device::cuda());
  a.fill(1.0f);
  bench::time_calls(state, [&] {
    KILN_CUDA_CHECK(cudaMemcpyAsync(b.data(), a.data(), n * 4, cudaMemcpyDeviceToDevice, kiln::cuda::stream()));
  }, 8.0 * n, 0);
}
BENCHMARK(Copy)->Name("Copy/f32")->UseManualTime()->Unit(benchmark::kMillisecond);

constexpr auto x1 = kiln::input<"x", 1>();
template <bench::Mode M>
void W1(benchmark::State& state) {
  const std::size_t n = std::size_t{1} << 26;
  const auto xd = kiln::randn<float>({n}, 1).cuda();
  run<M>(state, kiln::gelu(x1 * 1.5f + 0.5f) * kiln::sigmoid(x1) + kiln::tanh(x1), {n}, 8.0 * n, 0, x1 = xd);
}

constexpr auto x = kiln::input<"x", 2>();
constexpr auto r = kiln::input<"r", 2>();
constexpr auto g = kiln::param<"g", 1>();
constexpr auto b = kiln::param<"b", 1>();
template <bench::Mode M>
void W2(benchmark::State& state) {
  const std::size_t rows = 16384, d = 768;
  const auto xd = kiln::randn<float>({rows, d}, 1).cuda(), rd = kiln::randn<float>({rows, d}, 2).cuda();
  const auto gd = kiln::randn<float>({d}, 3).cuda(), bd = kiln::randn<float>({d}, 4).cuda();
  run<M>(state, kiln::layer_norm(x + r, g, b, 1e-5), {rows, d}, 12.0 * rows * d, 0, x = xd, r = rd, g = gd, b = bd);
}

template <bench::Mode M>
void W3(benchmark::State& state) {
  const std::size_t rows = 16384, d = 1024;
  const auto sd = kiln::randn<float>({rows, d}, 1).cuda();
  run<M>(state, kiln::softmax(x * 0.125f), {rows, d}, 8.0 * rows * d, 0, x = sd);
}

constexpr auto w1 = kiln::param<"w1", 2>();
constexpr auto b1 = kiln::param<"b1", 1>();
constexpr auto w2 = kiln::param<"w2", 2>();
constexpr auto b2 = kiln::param<"b2", 1>();
template <bench::Mode M>
void W4(benchmark::State& state) {
  const std::size_t B = static_cast<std::size_t>(state.range(0)), d = 768, h = 3072;
  const auto xd = kiln::randn<float>({B, d}, 1).cuda();
  const auto w1d = kiln::randn<float>({d, h}, 2).cuda(), b1d = kiln::randn<float>({h}, 3).cuda();
  const auto w2d = kiln::randn<float>({h, d}, 4).cuda(), b2d = kiln::randn<float>({d}, 5).cuda();
  const double flops = 2.0 * B * d * h * 2, bytes = 4.0 * (2 * d * h + h + d + 2 * B * d);
  run<M>(state, kiln::matmul(kiln::gelu(kiln::matmul(x, w1) + b1), w2) + b2, {B, d}, bytes, flops, x = xd, w1 = w1d,
         b1 = b1d, w2 = w2d, b2 = b2d);
}

#define KILN_MODES(W, NAME, ...)                                                                                       \
  BENCHMARK(W<bench::Mode::Eager>)->Name(NAME "/f32/Eager")->UseManualTime()->Unit(benchmark::kMillisecond)__VA_ARGS__; \
  BENCHMARK(W<bench::Mode::Default>)->Name(NAME "/f32/Default")->UseManualTime()->Unit(benchmark::kMillisecond)__VA_ARGS__; \
  BENCHMARK(W<bench::Mode::ReduceOverhead>)->Name(NAME "/f32/ReduceOverhead")->UseManualTime()->Unit(benchmark::kMillisecond)__VA_ARGS__; \
  BENCHMARK(W<bench::Mode::MaxAutotune>)->Name(NAME "/f32/MaxAutotune")->UseManualTime()->Unit(benchmark::kMillisecond)__VA_ARGS__;
KILN_MODES(W1, "W1")
KILN_MODES(W2, "W2")
KILN_MODES(W3, "W3")

#define KILN_W4(B)                                                                                                           \
  BENCHMARK(W4<bench::Mode::Eager>)->Name("W4/B" #B "/f32/Eager")->Arg(B)->UseManualTime()->Unit(benchmark::kMillisecond);   \
  BENCHMARK(W4<bench::Mode::Default>)->Name("W4/B" #B "/f32/Default")->Arg(B)->UseManualTime()->Unit(benchmark::kMillisecond); \
  BENCHMARK(W4<bench::Mode::ReduceOverhead>)->Name("W4/B" #B "/f32/ReduceOverhead")->Arg(B)->UseManualTime()->Unit(benchmark::kMillisecond); \
  BENCHMARK(W4<bench::Mode::MaxAutotune>)->Name("W4/B" #B "/f32/MaxAutotune")->Arg(B)->UseManualTime()->Unit(benchmark::kMillisecond);
KILN_W4(1)
KILN_W4(16)
KILN_W4(256)
KILN_W4(4096)

}  // namespace

BENCHMARK_MAIN();
