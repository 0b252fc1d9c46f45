// W2, add + layer_norm over [4096, 768], and W3, softmax(s * 0.125) over [4096, 1024], f32;
// peers: hand-written Eigen loops over rows on every thread. Bytes per call: W2 reads x and r
// and writes y (12 bytes per element); W3 reads s and writes y (8). Then attention (below).
#include <cmath>

#include "common.hpp"

namespace {

using Rows = Eigen::Array<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr std::size_t kRows = 4096, kD2 = 768, kD3 = 1024;
constexpr auto x = kiln::input<"x", 2>();
constexpr auto r = kiln::input<"r", 2>();
constexpr auto g = kiln::param<"g", 1>();
constexpr auto b = kiln::param<"b", 1>();
constexpr auto s = kiln::input<"s", 2>();
constexpr auto w2 = kiln::layer_norm(x + r, g, b, 1e-5);
constexpr auto w3 = kiln::softmax(s * 0.125f);

struct Data {
  kiln::Tensor<float> xt = kiln::randn<float>({kRows, kD2}, 1), rt = kiln::randn<float>({kRows, kD2}, 2);
  kiln::Tensor<float> gt = kiln::randn<float>({kD2}, 3), bt = kiln::randn<float>({kD2}, 4);
  kiln::Tensor<float> st = kiln::randn<float>({kRows, kD3}, 5);
};
const Data& data() {
  static const Data d;
  return d;
}

template <bench::Mode M>
void W2(benchmark::State& state) {
  const Data& d = data();
  kiln::Tensor<float> out({kRows, kD2});
  bench::run_kiln<M>(state, w2, out, x = d.xt, r = d.rt, g = d.gt, b = d.bt);
  bench::set_counters(state, 12.0 * kRows * kD2, 10.0 * kRows * kD2);
}
template <bench::Mode M>
void W3(benchmark::State& state) {
  const Data& d = data();
  kiln::Tensor<float> out({kRows, kD3});
  bench::run_kiln<M>(state, w3, out, s = d.st);
  bench::set_counters(state, 8.0 * kRows * kD3, 5.0 * kRows * kD3);
}
#define KILN_MODES(W)                                                                                             \
  BENCHMARK(W<bench::Mode::Eager>)->Name(#W "/kiln/Eager")->UseRealTime()->Unit(benchmark::kMillisecond);         \
  BENCHMARK(W<bench::Mode::Default>)->Name(#W "/kiln/Default")->UseRealTime()->Unit(benchmark::kMillisecond);     \
  BENCHMARK(W<bench::Mode::ReduceOverhead>)->Name(#W "/kiln/ReduceOverhead")->UseRealTime()->Unit(benchmark::kMillisecond); \
  BENCHMARK(W<bench::Mode::MaxAutotune>)->Name(#W "/kiln/MaxAutotune")->UseRealTime()->Unit(benchmark::kMillisecond);
KILN_MODES(W2)
KILN_MODES(W3)

void W2_EigenLoop(benchmark::State& state) {
  const Data& d = data();
  Eigen::Map<const Rows> X(d.xt.data(), kRows, kD2), R(d.rt.data(), kRows, kD2);
  Eigen::Map<const Eigen::ArrayXf> G(d.gt.data(), kD2), B(d.bt.data(), kD2);
  Rows Y(kRows, kD2);
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (Eigen::Index i = 0; i < static_cast<Eigen::Index>(kRows); ++i) {
      const Eigen::Array<float, 1, Eigen::Dynamic> v = X.row(i) + R.row(i);
      const float mean = v.mean();
      const float var = (v - mean).square().mean();
      Y.row(i) = (v - mean) * (1.0f / std::sqrt(var + 1e-5f)) * G.transpose() + B.transpose();
    }
    benchmark::ClobberMemory();
  }
  bench::set_counters(state, 12.0 * kRows * kD2, 10.0 * kRows * kD2);
}
BENCHMARK(W2_EigenLoop)->Name("W2/peer/EigenLoop")->UseRealTime()->Unit(benchmark::kMillisecond);

void W3_EigenLoop(benchmark::State& state) {
  const Data& d = data();
  Eigen::Map<const Rows> S(d.st.data(), kRows, kD3);
  Rows Y(kRows, kD3);
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (Eigen::Index i = 0; i < static_cast<Eigen::Index>(kRows); ++i) {
      const Eigen::Array<float, 1, Eigen::Dynamic> v = S.row(i) * 0.125f;
      const Eigen::Array<float, 1, Eigen::Dynamic> e = (v - v.maxCoeff()).exp();
      Y.row(i) = e / e.sum();
    }
    benchmark::ClobberMemory();
  }
  bench::set_counters(state, 8.0 * kRows * kD3, 5.0 * kRows * kD3);
}
BENCHMARK(W3_EigenLoop)->Name("W3/peer/EigenLoop")->UseRealTime()->Unit(benchmark::kMillisecond);

// Attention, not one of the W-workloads: softmax(q k^T / 8) v for B = 1, H = 12, S = 512,
// D = 64, f32, no mask. kiln's fused kernel against the unfused form a library without fused
// attention runs (torch 1.13's softmax(q @ k^T * scale) @ v; bench/peers/torch_cpu.py times
// it): per head, a GEMM, a row softmax and a GEMM through Eigen, heads spread over threads.
// FLOPs: the two products, 4 H S^2 D; bytes: q, k, v read and the output written.
constexpr std::size_t kAttnH = 12, kAttnS = 512, kAttnD = 64;
constexpr double kAttnFlops = 4.0 * kAttnH * kAttnS * kAttnS * kAttnD, kAttnBytes = 16.0 * kAttnH * kAttnS * kAttnD;
struct AttnData {
  kiln::Tensor<float> q = kiln::randn<float>({1, kAttnH, kAttnS, kAttnD}, 11);
  kiln::Tensor<float> k = kiln::randn<float>({1, kAttnH, kAttnS, kAttnD}, 12);
  kiln::Tensor<float> v = kiln::randn<float>({1, kAttnH, kAttnS, kAttnD}, 13);
};
const AttnData& attn_data() {
  static const AttnData d;
  return d;
}
template <bench::Mode M>
void Attn(benchmark::State& state) {
  constexpr auto q = kiln::input<"q", 4>();
  constexpr auto k = kiln::input<"k", 4>();
  constexpr auto v = kiln::input<"v", 4>();
  const AttnData& d = attn_data();
  kiln::Tensor<float> out({1, kAttnH, kAttnS, kAttnD});
  bench::run_kiln<M>(state, kiln::attention(q, k, v), out, q = d.q, k = d.k, v = d.v);
  bench::set_counters(state, kAttnBytes, kAttnFlops);
}
BENCHMARK(Attn<bench::Mode::Default>)->Name("Attn/kiln/Default")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(Attn<bench::Mode::ReduceOverhead>)->Name("Attn/kiln/ReduceOverhead")->UseRealTime()->Unit(benchmark::kMillisecond);

void Attn_EigenUnfused(benchmark::State& state) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const AttnData& d = attn_data();
  const auto n = static_cast<Eigen::Index>(kAttnS), dim = static_cast<Eigen::Index>(kAttnD);
  Mat out(kAttnH * kAttnS, kAttnD);
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (Eigen::Index h = 0; h < static_cast<Eigen::Index>(kAttnH); ++h) {
      const Eigen::Map<const Mat> Q(d.q.data() + h * n * dim, n, dim), K(d.k.data() + h * n * dim, n, dim),
          V(d.v.data() + h * n * dim, n, dim);
      Mat S = (Q * K.transpose()) * 0.125f;
      for (Eigen::Index i = 0; i < n; ++i) {
        S.row(i).array() = (S.row(i).array() - S.row(i).maxCoeff()).exp();
        S.row(i) /= S.row(i).sum();
      }
      out.middleRows(h * n, n).noalias() = S * V;
    }
    benchmark::ClobberMemory();
  }
  bench::set_counters(state, kAttnBytes, kAttnFlops);
}
BENCHMARK(Attn_EigenUnfused)->Name("Attn/peer/EigenUnfused")->UseRealTime()->Unit(benchmark::kMillisecond);

// The attention of a training step: the char-GPT's (examples/train_gpt.cpp) causal attention,
// q, k, v [32, 4, 64, 32] f32, forward and the gradients of q, k and v for a cotangent g (the
// forward, the backward's statistics, then dq, dk and dv: five attention kernels). Against the
// same through torch 1.13's autograd (bench/peers/torch_cpu.py, AttnGrad/peer/PyTorch). FLOPs:
// the forward's two products and the backward's five, counted over the whole score matrix.
constexpr std::size_t kGradB = 32, kGradH = 4, kGradS = 64, kGradD = 32;
constexpr double kGradFlops = 14.0 * kGradB * kGradH * kGradS * kGradS * kGradD;
constexpr double kGradBytes = 4.0 * 8 * kGradB * kGradH * kGradS * kGradD;  // q, k, v, g in; out, dq, dk, dv out
template <bench::Mode M>
void AttnGrad(benchmark::State& state) {
  constexpr auto q = kiln::input<"q", 4>();
  constexpr auto k = kiln::input<"k", 4>();
  constexpr auto v = kiln::input<"v", 4>();
  constexpr auto g = kiln::input<"g", 4>();
  constexpr auto y = kiln::attention<kiln::causal>(q, k, v);
  const auto [dq, dk, dv] = kiln::grad(kiln::sum(y * g), q, k, v);
  const kiln::Shape shape{kGradB, kGradH, kGradS, kGradD};
  const auto qt = kiln::randn<float>(shape, 21), kt = kiln::randn<float>(shape, 22), vt = kiln::randn<float>(shape, 23),
             gt = kiln::randn<float>(shape, 24);
  kiln::Tensor<float> unused;
  bench::run_kiln<M>(state, kiln::outputs(y, dq, dk, dv), unused, q = qt, k = kt, v = vt, g = gt);
  bench::set_counters(state, kGradBytes, kGradFlops);
}
BENCHMARK(AttnGrad<bench::Mode::Default>)->Name("AttnGrad/kiln/Default")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
