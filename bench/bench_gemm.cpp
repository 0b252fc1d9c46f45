// W4, the transformer FFN gelu(x W1 + b1) W2 + b2 with W1 [768, 3072] and W2 [3072, 768], f32,
// at B = 1, 16, 256; peers: Eigen dense (its product and a bias + GELU pass), and Eigen's SGEMM
// at 2048^3 as the machine's GEMM rate, measured in the same run.
#include <cmath>

#include <unsupported/Eigen/SpecialFunctions>

#include "common.hpp"

namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
constexpr std::size_t kD = 768, kH = 3072;

constexpr auto x = kiln::input<"x", 2>();
constexpr auto w1 = kiln::param<"w1", 2>();
constexpr auto b1 = kiln::param<"b1", 1>();
constexpr auto w2 = kiln::param<"w2", 2>();
constexpr auto b2 = kiln::param<"b2", 1>();
constexpr auto w4 = kiln::matmul(kiln::gelu(kiln::matmul(x, w1) + b1), w2) + b2;

struct Weights {
  kiln::Tensor<float> w1t = kiln::randn<float>({kD, kH}, 1), w2t = kiln::randn<float>({kH, kD}, 2);
  kiln::Tensor<float> b1t = kiln::randn<float>({kH}, 3), b2t = kiln::randn<float>({kD}, 4);
};
const Weights& weights() {
  static const Weights w;
  return w;
}
double flops(std::size_t batch) { return 4.0 * batch * kD * kH; }
double bytes(std::size_t batch) { return 4.0 * (2 * kD * kH + kH + kD + 2 * batch * kD); }

template <bench::Mode M>
void W4(benchmark::State& state) {
  const std::size_t batch = static_cast<std::size_t>(state.range(0));
  const Weights& w = weights();
  const auto xt = kiln::randn<float>({batch, kD}, 5);
  kiln::Tensor<float> out({batch, kD});
  bench::run_kiln<M>(state, w4, out, x = xt, w1 = w.w1t, b1 = w.b1t, w2 = w.w2t, b2 = w.b2t);
  bench::set_counters(state, bytes(batch), flops(batch));
}
#define KILN_W4(M)                                                                                  \
  BENCHMARK(W4<bench::Mode::M>)->Name("W4/kiln/" #M)->Arg(1)->Arg(16)->Arg(256)->UseRealTime()->Unit( \
      benchmark::kMillisecond);
KILN_W4(Eager)
KILN_W4(Default)
KILN_W4(ReduceOverhead)
KILN_W4(MaxAutotune)

void W4_EigenDense(benchmark::State& state) {
  const std::size_t batch = static_cast<std::size_t>(state.range(0));
  const Weights& w = weights();
  const auto xt = kiln::randn<float>({batch, kD}, 5);
  Eigen::Map<const Mat> X(xt.data(), batch, kD), W1(w.w1t.data(), kD, kH), W2(w.w2t.data(), kH, kD);
  Eigen::Map<const Eigen::RowVectorXf> B1(w.b1t.data(), kH), B2(w.b2t.data(), kD);
  Mat H(batch, kH), Y(batch, kD);
  for (auto _ : state) {
    H.noalias() = X * W1;
    H.rowwise() += B1;
    H = (0.5f * H.array() * (1.0f + (H.array() * 0.70710678f).erf())).matrix();
    Y.noalias() = H * W2;
    Y.rowwise() += B2;
    benchmark::ClobberMemory();
  }
  bench::set_counters(state, bytes(batch), flops(batch));
}
BENCHMARK(W4_EigenDense)->Name("W4/peer/EigenDense")->Arg(1)->Arg(16)->Arg(256)->UseRealTime()->Unit(benchmark::kMillisecond);

void SGEMM(benchmark::State& state) {
  const Eigen::Index n = 2048;
  const Mat A = Mat::Random(n, n), B = Mat::Random(n, n);
  Mat C(n, n);
  for (auto _ : state) {
    C.noalias() = A * B;
    benchmark::ClobberMemory();
  }
  bench::set_counters(state, 12.0 * n * n, 2.0 * n * n * n);
}
BENCHMARK(SGEMM)->Name("limit/EigenSGEMM-2048")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
