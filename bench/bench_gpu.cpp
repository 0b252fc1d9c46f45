// kiln on one CUDA GPU: W1-W4 at the GPU sizes of docs/benchmarks.md, f32 and bf16, in Eager, Default,
// ReduceOverhead (CUDA graphs) and MaxAutotune, plus the device-to-device copy that sets the
// bandwidth ceiling in the same run. Timed by bench::time_calls (gpu_timing.hpp; use
// --benchmark_repetitions and the median). Counters: GBps (the fewest bytes the workload must
// move, over the time), TFLOPs, peak_MB (kiln's allocator, the inputs and outputs included).
// Run by scripts/bench_gpu.sh.
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "gpu_timing.hpp"

namespace {

// Eager and Default return fresh outputs (from the caching allocator); ReduceOverhead and
// MaxAutotune write into the caller's output.
template <bench::Mode M, class S, class Expr, class... Bs>
void run(benchmark::State& state, const Expr& e, const kiln::Shape& out_shape, double bytes, double flops, const Bs&... bs) {
  auto f = bench::compiled<M>(e);
  kiln::Tensor<S> out(out_shape, kiln::Device::cuda());
  bench::time_calls(state, [&] {
    if constexpr (M == bench::Mode::Eager || M == bench::Mode::Default) benchmark::DoNotOptimize(f(bs...));
    else f.into(out, bs...);
  }, bytes, flops);
  // KILN_BENCH_EXPLAIN=1: the plan after the timed calls, with MaxAutotune's choice per kernel
  // and each candidate's time, on stderr.
  if constexpr (requires { f.explain(); })
    if (std::getenv("KILN_BENCH_EXPLAIN")) std::fprintf(stderr, "%s\n", f.explain().c_str());
}

// A device-to-device copy of traffic_bytes / 2 bytes (half read, half written), timed as the
// workloads are. Copy/f32 (2^28 floats, 2 GB moved) is the bandwidth ceiling; Copy/<workload>
// moves as many bytes as that workload must: W2 and W3 move 38-151 MB in 10-40 us, where the
// start and the drain of a grid and the L2 (the H200's holds 50 MB of the last call's bytes)
// weigh more than in the 2 GB copy; report_gpu.py shows each workload against both.
void CopyLike(benchmark::State& state, double traffic_bytes) {
  const auto n = static_cast<std::size_t>(traffic_bytes / 2);
  kiln::cuda::Buffer a(n, kiln::cuda::current_device()), b(n, kiln::cuda::current_device());
  KILN_CUDA_CHECK(cudaMemsetAsync(a.get(), 1, n, kiln::cuda::stream()));
  bench::time_calls(state, [&] {
    KILN_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice, kiln::cuda::stream()));
  }, 2.0 * static_cast<double>(n), 0);
}
BENCHMARK_CAPTURE(CopyLike, f32, 8.0 * (std::size_t{1} << 28))->Name("Copy/f32")->UseManualTime()->Unit(benchmark::kMillisecond);
// The bytes of W1 (x read, y written), W2 (x, r read, y written) and W3 (s read, y written).
constexpr double kW1Elems = 67108864.0, kW2Elems = 16384.0 * 768, kW3Elems = 16384.0 * 1024;
BENCHMARK_CAPTURE(CopyLike, w1_f32, 2 * 4 * kW1Elems)->Name("Copy/W1/f32")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(CopyLike, w1_bf16, 2 * 2 * kW1Elems)->Name("Copy/W1/bf16")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(CopyLike, w2_f32, 3 * 4 * kW2Elems)->Name("Copy/W2/f32")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(CopyLike, w2_bf16, 3 * 2 * kW2Elems)->Name("Copy/W2/bf16")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(CopyLike, w3_f32, 2 * 4 * kW3Elems)->Name("Copy/W3/f32")->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(CopyLike, w3_bf16, 2 * 2 * kW3Elems)->Name("Copy/W3/bf16")->UseManualTime()->Unit(benchmark::kMillisecond);

// Inputs drawn in f32 and converted, as the PyTorch script does, so both types see the same
// values. Drawn once per process and kept on the host (Google Benchmark runs each case once
// per repetition, and drawing 2^26 normals takes longer than the timing); each case copies
// its own to the device, so peak_MB counts only that case's tensors.
template <class S>
kiln::Tensor<S> randn_cuda(const kiln::Shape& shape, std::uint64_t seed) {
  static std::map<std::pair<std::string, std::uint64_t>, kiln::Tensor<S>> drawn;
  auto [it, fresh] = drawn.try_emplace({shape.str(), seed});
  if (fresh) it->second = kiln::randn<float>(shape, seed).template as<S>();
  return it->second.cuda();
}

// Bytes: the fewest the workload must move (each input read once, the output written once).
template <bench::Mode M, class S>
void W1(benchmark::State& state) {
  constexpr auto x = kiln::input<"x", 1, S>();
  const std::size_t n = std::size_t{1} << 26;
  const auto& xd = randn_cuda<S>({n}, 1);
  run<M, S>(state, kiln::gelu(x * 1.5f + 0.5f) * kiln::sigmoid(x) + kiln::tanh(x), {n}, 2.0 * sizeof(S) * n, 0, x = xd);
}

template <bench::Mode M, class S>
void W2(benchmark::State& state) {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto r = kiln::input<"r", 2, S>();
  constexpr auto g = kiln::param<"g", 1, S>();
  constexpr auto b = kiln::param<"b", 1, S>();
  const std::size_t rows = 16384, d = 768;
  const auto& xd = randn_cuda<S>({rows, d}, 1), &rd = randn_cuda<S>({rows, d}, 2);
  const auto &gd = randn_cuda<S>({d}, 3), &bd = randn_cuda<S>({d}, 4);
  run<M, S>(state, kiln::layer_norm(x + r, g, b, 1e-5), {rows, d}, 3.0 * sizeof(S) * rows * d, 0, x = xd, r = rd, g = gd,
            b = bd);
}

template <bench::Mode M, class S>
void W3(benchmark::State& state) {
  constexpr auto x = kiln::input<"x", 2, S>();
  const std::size_t rows = 16384, d = 1024;
  const auto& sd = randn_cuda<S>({rows, d}, 1);
  run<M, S>(state, kiln::softmax(x * 0.125f), {rows, d}, 2.0 * sizeof(S) * rows * d, 0, x = sd);
}

template <bench::Mode M, class S>
void W4(benchmark::State& state) {
  constexpr auto x = kiln::input<"x", 2, S>();
  constexpr auto w1 = kiln::param<"w1", 2, S>();
  constexpr auto b1 = kiln::param<"b1", 1, S>();
  constexpr auto w2 = kiln::param<"w2", 2, S>();
  constexpr auto b2 = kiln::param<"b2", 1, S>();
  const std::size_t B = static_cast<std::size_t>(state.range(0)), d = 768, h = 3072;
  const auto& xd = randn_cuda<S>({B, d}, 1);
  const auto &w1d = randn_cuda<S>({d, h}, 2), &b1d = randn_cuda<S>({h}, 3);
  const auto &w2d = randn_cuda<S>({h, d}, 4), &b2d = randn_cuda<S>({d}, 5);
  const double flops = 2.0 * B * d * h * 2, bytes = double(sizeof(S)) * (2 * d * h + h + d + 2 * B * d);
  run<M, S>(state, kiln::matmul(kiln::gelu(kiln::matmul(x, w1) + b1), w2) + b2, {B, d}, bytes, flops, x = xd, w1 = w1d,
            b1 = b1d, w2 = w2d, b2 = b2d);
}

using kiln::bf16;
#define KILN_MODE(W, NAME, S, MODE, ...) \
  BENCHMARK(W<bench::Mode::MODE, S>)->Name(NAME "/" #S "/" #MODE)->UseManualTime()->Unit(benchmark::kMillisecond)__VA_ARGS__;
#define KILN_MODES(W, NAME, S, ...)                 \
  KILN_MODE(W, NAME, S, Eager, __VA_ARGS__)          \
  KILN_MODE(W, NAME, S, Default, __VA_ARGS__)        \
  KILN_MODE(W, NAME, S, ReduceOverhead, __VA_ARGS__) \
  KILN_MODE(W, NAME, S, MaxAutotune, __VA_ARGS__)
// Named W1/f32/Eager, W4/B16/bf16/ReduceOverhead, ..., as report_gpu.py reads them.
// Not one of docs/benchmarks.md's workloads: softmax over rows too long for registers or a shared-memory row
// cache ([256, 65536]: 16384 16-byte units a row), streamed from memory. Two passes for the
// max and the sum, then one for the output, would read the row three times (at most half the
// copy rate in GBps, which counts one read and one write); online softmax reads it twice.
template <bench::Mode M, class S>
void SoftmaxLong(benchmark::State& state) {
  constexpr auto x = kiln::input<"x", 2, S>();
  const std::size_t rows = 256, d = 65536;
  const auto& sd = randn_cuda<S>({rows, d}, 1);
  run<M, S>(state, kiln::softmax(x), {rows, d}, 2.0 * sizeof(S) * rows * d, 0, x = sd);
}

// Not one of docs/benchmarks.md's workloads: an embedding's backward, GPT-2's token table
// ([50257, 768]) and a batch of 8 x 1024 ids, that is scatter_add_rows(ids, g, table), which
// kiln's VJP of embedding lowers to (deterministic: each row summed by one block in id order).
// Bytes: g and the ids read once, the table's gradient written once.
template <bench::Mode M, class S>
void EmbBwd(benchmark::State& state) {
  constexpr auto ids = kiln::input<"ids", 2, kiln::i64>();
  constexpr auto g = kiln::input<"g", 3, S>();
  constexpr auto table = kiln::input<"table", 2, S>();
  const std::size_t B = 8, T = 1024, V = 50257, d = 768;
  const auto idd = kiln::randint<kiln::i64>(0, V, {B, T}, 1, kiln::Device::cuda());
  const auto &gd = randn_cuda<S>({B, T, d}, 2), &td = randn_cuda<S>({V, d}, 3);
  const double bytes = double(sizeof(S)) * (B * T * d + V * d) + 8.0 * B * T;
  run<M, S>(state, kiln::scatter_add_rows(ids, g, table), {V, d}, bytes, 0, ids = idd, g = gd, table = td);
}

// Not one of docs/benchmarks.md's workloads: attention as GPT-2 small runs it, bf16, B = 8,
// H = 12, S = 1024, D = 64, causal (A1), forward alone and forward + backward (the output and
// dq, dk, dv given the output's gradient g: kiln::vjp). FLOPs as FlashAttention counts them:
// 4 B H S^2 D / 2 for the causal forward (two products over the pairs the mask keeps), 2.5
// times that for the backward. Bytes: q, k, v read and the output written (forward).
constexpr std::size_t kAttnB = 8, kAttnH = 12, kAttnS = 1024, kAttnD = 64;
constexpr double kAttnFwdFlops = 4.0 * kAttnB * kAttnH * kAttnS * kAttnS * kAttnD / 2;
template <bench::Mode M, class S>
void AttnFwd(benchmark::State& state) {
  constexpr auto q = kiln::input<"q", 4, S>();
  constexpr auto k = kiln::input<"k", 4, S>();
  constexpr auto v = kiln::input<"v", 4, S>();
  const kiln::Shape shape{kAttnB, kAttnH, kAttnS, kAttnD};
  const auto &qd = randn_cuda<S>(shape, 1), &kd = randn_cuda<S>(shape, 2), &vd = randn_cuda<S>(shape, 3);
  run<M, S>(state, kiln::attention<kiln::causal>(q, k, v), shape, 4.0 * sizeof(S) * shape.numel(), kAttnFwdFlops, q = qd,
            k = kd, v = vd);
}
template <bench::Mode M, class S>
void AttnFwdBwd(benchmark::State& state) {
  constexpr auto q = kiln::input<"q", 4, S>();
  constexpr auto k = kiln::input<"k", 4, S>();
  constexpr auto v = kiln::input<"v", 4, S>();
  constexpr auto g = kiln::input<"g", 4, S>();
  constexpr auto y = kiln::attention<kiln::causal>(q, k, v);
  constexpr auto grads = kiln::vjp(y, g, q, k, v);
  const kiln::Shape shape{kAttnB, kAttnH, kAttnS, kAttnD};
  const auto &qd = randn_cuda<S>(shape, 1), &kd = randn_cuda<S>(shape, 2), &vd = randn_cuda<S>(shape, 3);
  const auto& gd = randn_cuda<S>(shape, 4);
  auto f = bench::compiled<M>(kiln::outputs(y, std::get<0>(grads), std::get<1>(grads), std::get<2>(grads)));
  bench::time_calls(state, [&] { benchmark::DoNotOptimize(f(q = qd, k = kd, v = vd, g = gd)); },
                    8.0 * sizeof(S) * shape.numel(), 3.5 * kAttnFwdFlops);
}
// Decode (A2): one query token against a static cache of L positions, bf16, H = 12, D = 64;
// range(0) = B, range(1) = L. Bytes: the cache's k and v read once.
template <bench::Mode M, class S>
void AttnDecode(benchmark::State& state) {
  constexpr auto q = kiln::input<"q", 4, S>();
  constexpr auto k = kiln::input<"k", 4, S>();
  constexpr auto v = kiln::input<"v", 4, S>();
  const auto B = static_cast<std::size_t>(state.range(0)), L = static_cast<std::size_t>(state.range(1));
  const kiln::Shape qs{B, kAttnH, 1, kAttnD}, cache{B, kAttnH, L, kAttnD};
  const auto& qd = randn_cuda<S>(qs, 1);
  const auto &kd = randn_cuda<S>(cache, 2), &vd = randn_cuda<S>(cache, 3);
  run<M, S>(state, kiln::attention<kiln::causal>(q, k, v), qs, 2.0 * sizeof(S) * cache.numel(),
            4.0 * B * kAttnH * L * kAttnD, q = qd, k = kd, v = vd);
}

// One decode step of a static KV cache: the new token's k and v written into the caches at
// position L - 1 (write_slice assigned in place), then attention over all L positions (kv_len
// = L). Against AttnDecode, the cost of the cache write in the same graph.
template <bench::Mode M, class S>
void AttnDecodeStep(benchmark::State& state) {
  constexpr auto q = kiln::input<"q", 4, S>();
  constexpr auto kc = kiln::input<"kc", 4, S>();
  constexpr auto vc = kiln::input<"vc", 4, S>();
  constexpr auto kn = kiln::input<"kn", 4, S>();
  constexpr auto vn = kiln::input<"vn", 4, S>();
  constexpr auto pos = kiln::input<"pos", 0, kiln::i64>();
  constexpr auto len = kiln::input<"len", 0, kiln::i64>();
  constexpr auto k_all = kiln::write_slice<2>(kc, pos, kn);
  constexpr auto v_all = kiln::write_slice<2>(vc, pos, vn);
  const auto B = static_cast<std::size_t>(state.range(0)), L = static_cast<std::size_t>(state.range(1));
  const kiln::Shape qs{B, kAttnH, 1, kAttnD}, cache{B, kAttnH, L, kAttnD};
  const auto& qd = randn_cuda<S>(qs, 1);
  const auto &knd = randn_cuda<S>(qs, 4), &vnd = randn_cuda<S>(qs, 5);
  auto kcd = randn_cuda<S>(cache, 2), vcd = randn_cuda<S>(cache, 3);
  const auto pd = kiln::from_vector<kiln::i64>({static_cast<std::int64_t>(L) - 1}, kiln::Shape{}).cuda();
  const auto ld = kiln::from_vector<kiln::i64>({static_cast<std::int64_t>(L)}, kiln::Shape{}).cuda();
  run<M, S>(state,
            kiln::outputs(kiln::attention<kiln::causal>(q, k_all, v_all, len), kiln::assign(kc, k_all), kiln::assign(vc, v_all)),
            qs, 2.0 * sizeof(S) * cache.numel(), 4.0 * B * kAttnH * L * kAttnD, q = qd, kc = kcd, vc = vcd, kn = knd,
            vn = vnd, pos = pd, len = ld);
}

using f32 = float;
KILN_MODE(AttnFwd, "AttnFwd", bf16, Default)
KILN_MODE(AttnFwd, "AttnFwd", bf16, ReduceOverhead)
KILN_MODE(AttnFwdBwd, "AttnFwdBwd", bf16, Default)
KILN_MODE(AttnDecode, "AttnDecode", bf16, ReduceOverhead, ->Args({1, 2048})->Args({1, 32768})->Args({8, 8192}))
KILN_MODE(AttnDecodeStep, "AttnDecodeStep", bf16, ReduceOverhead, ->Args({1, 2048})->Args({1, 32768})->Args({8, 8192}))
KILN_MODE(SoftmaxLong, "SoftmaxLong", f32, Default)
KILN_MODE(SoftmaxLong, "SoftmaxLong", bf16, Default)
KILN_MODE(EmbBwd, "EmbBwd", f32, Default)
KILN_MODE(EmbBwd, "EmbBwd", f32, ReduceOverhead)
KILN_MODE(EmbBwd, "EmbBwd", bf16, Default)
KILN_MODE(EmbBwd, "EmbBwd", bf16, ReduceOverhead)
KILN_MODES(W1, "W1", f32)
KILN_MODES(W2, "W2", f32)
KILN_MODES(W3, "W3", f32)
KILN_MODES(W1, "W1", bf16)
KILN_MODES(W2, "W2", bf16)
KILN_MODES(W3, "W3", bf16)
#define KILN_W4(B)                            \
  KILN_MODES(W4, "W4/B" #B, f32, ->Arg(B))    \
  KILN_MODES(W4, "W4/B" #B, bf16, ->Arg(B))
KILN_W4(1)
KILN_W4(16)
KILN_W4(256)
KILN_W4(4096)

}  // namespace

BENCHMARK_MAIN();
