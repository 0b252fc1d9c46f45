// The reference workloads W1-W4 (docs/benchmarks.md) at test sizes: compiled against the float64
// reference and against eager.
#include "reference.hpp"

TEST_CASE("W1: pointwise chain") {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto y = kiln::gelu(x * 1.5f + 0.5f) * kiln::sigmoid(x) + kiln::tanh(x);
  const auto xt = kiln::randn<float>({1 << 18}, 91);
  const auto want = ref::map(ref::from(xt), [](double v) { return ref::gelu(v * 1.5 + 0.5) * ref::sigmoid(v) + std::tanh(v); });
  ref::check_close(kiln::compile(y)(x = xt), want, 5e-5, 5e-6);
  ref::check_close(kiln::eager(y)(x = xt), want, 5e-5, 5e-6);
}

TEST_CASE("W2: add + layer_norm") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto r = kiln::input<"r", 2>();
  constexpr auto g = kiln::param<"g", 1>();
  constexpr auto b = kiln::param<"b", 1>();
  const auto xt = kiln::randn<float>({256, 768}, 92), rt = kiln::randn<float>({256, 768}, 93);
  const auto gt = kiln::randn<float>({768}, 94), bt = kiln::randn<float>({768}, 95);
  const auto want = ref::layer_norm(ref::zip(ref::from(xt), ref::from(rt), [](double p, double q) { return p + q; }),
                                    ref::from(gt), ref::from(bt), 1e-5);
  ref::check_close(kiln::compile(kiln::layer_norm(x + r, g, b, 1e-5))(x = xt, r = rt, g = gt, b = bt), want, 1e-4, 1e-5);
}

TEST_CASE("W3: scaled softmax") {
  constexpr auto s = kiln::input<"s", 2>();
  const auto st = kiln::randn<float>({256, 1024}, 96);
  const auto want = ref::softmax(ref::map(ref::from(st), [](double v) { return v * 0.125; }));
  ref::check_close(kiln::compile(kiln::softmax(s * 0.125f))(s = st), want, 5e-5, 1e-8);
}

TEST_CASE("W4: transformer FFN at B = 1, 16, 64") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w1 = kiln::param<"w1", 2>();
  constexpr auto b1 = kiln::param<"b1", 1>();
  constexpr auto w2 = kiln::param<"w2", 2>();
  constexpr auto b2 = kiln::param<"b2", 1>();
  constexpr auto y = kiln::matmul(kiln::gelu(kiln::matmul(x, w1) + b1), w2) + b2;
  auto f = kiln::compile(y);
  auto w1t = kiln::randn<float>({768, 3072}, 97), w2t = kiln::randn<float>({3072, 768}, 98);
  for (std::size_t i = 0; i < w1t.numel(); ++i) w1t[i] *= 0.036f;
  for (std::size_t i = 0; i < w2t.numel(); ++i) w2t[i] *= 0.018f;
  const auto b1t = kiln::randn<float>({3072}, 99), b2t = kiln::randn<float>({768}, 100);
  for (const std::size_t batch : {1, 16, 64}) {
    const auto xt = kiln::randn<float>({batch, 768}, 101);
    const auto h = ref::map(ref::zip(ref::matmul(ref::from(xt), ref::from(w1t)), ref::from(b1t), [](double p, double q) { return p + q; }),
                            ref::gelu);
    const auto want = ref::zip(ref::matmul(h, ref::from(w2t)), ref::from(b2t), [](double p, double q) { return p + q; });
    ref::check_close(f(x = xt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t), want, 1e-4, 1e-4);
  }
}
