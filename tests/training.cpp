// Compiled training steps: kiln::assign updates bound tensors in place after every read;
// SGD with momentum and AdamW follow PyTorch's update formulas (checked over 10 steps against a
// float64 reference written here); a small classifier learns.
#include "reference.hpp"

namespace {
constexpr auto x = kiln::input<"x", 2, double>();
constexpr auto y = kiln::input<"y", 2, double>();
constexpr auto w = kiln::param<"w", 2, double>();

// loss(w) = mean((x w - y)^2); its gradient in float64, by hand: 2/(B N) x^T (x w - y).
std::vector<double> reference_grad(const std::vector<double>& wv, const kiln::Tensor<double>& xt, const kiln::Tensor<double>& yt) {
  const std::size_t B = xt.shape()[0], K = xt.shape()[1], N = yt.shape()[1];
  std::vector<double> r(B * N), g(K * N, 0.0);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t n = 0; n < N; ++n) {
      double acc = 0;
      for (std::size_t k = 0; k < K; ++k) acc += xt[b * K + k] * wv[k * N + n];
      r[b * N + n] = acc - yt[b * N + n];
    }
  for (std::size_t k = 0; k < K; ++k)
    for (std::size_t n = 0; n < N; ++n) {
      double acc = 0;
      for (std::size_t b = 0; b < B; ++b) acc += xt[b * K + k] * r[b * N + n];
      g[k * N + n] = 2.0 * acc / static_cast<double>(B * N);
    }
  return g;
}
void check_rel(const kiln::Tensor<double>& got, const std::vector<double>& want) {
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 1e-6 * std::abs(want[i]) + 1e-12);
}
}  // namespace

TEST_CASE("SGD with momentum matches PyTorch's formula over 10 steps") {
  constexpr auto v = kiln::param<"v", 2, double>();
  constexpr auto loss = kiln::nn::mse(kiln::matmul(x, w), y);
  auto [dw] = kiln::grad(loss, w);
  auto [av, aw] = kiln::nn::sgd_momentum(w, v, dw, 0.05, 0.9);
  auto step = kiln::compile<kiln::ReduceOverhead>(kiln::outputs(loss, av, aw));
  const auto xt = kiln::randn<double>({16, 6}, 1), yt = kiln::randn<double>({16, 3}, 2);
  kiln::Tensor<double> wt = kiln::randn<double>({6, 3}, 3), vt({6, 3});
  vt.fill(0.0);
  std::vector<double> rw(wt.data(), wt.data() + wt.numel()), rv(rw.size(), 0.0);
  for (int t = 0; t < 10; ++t) {
    auto [l] = step(x = xt, y = yt, w = wt, v = vt);
    const auto g = reference_grad(rw, xt, yt);
    for (std::size_t i = 0; i < rw.size(); ++i) {
      rv[i] = 0.9 * rv[i] + g[i];
      rw[i] -= 0.05 * rv[i];
    }
  }
  check_rel(wt, rw);
  check_rel(vt, rv);
}

TEST_CASE("SGD, plain and with momentum and weight decay, matches PyTorch's formula over 10 steps") {
  constexpr auto v = kiln::param<"v", 2, double>();
  constexpr auto loss = kiln::nn::mse(kiln::matmul(x, w), y);
  auto [dw] = kiln::grad(loss, w);
  auto [plain] = kiln::nn::sgd(w, dw, 0.05, 0.01);
  auto [av, aw] = kiln::nn::sgd(w, v, dw, 0.05, 0.9, 0.01);
  auto step_plain = kiln::compile(kiln::outputs(loss, plain));
  auto step = kiln::compile<kiln::ReduceOverhead>(kiln::outputs(loss, av, aw));
  const auto xt = kiln::randn<double>({16, 6}, 11), yt = kiln::randn<double>({16, 3}, 12);
  kiln::Tensor<double> wt = kiln::randn<double>({6, 3}, 13), w0 = wt, vt({6, 3});
  vt.fill(0.0);
  std::vector<double> rw(wt.data(), wt.data() + wt.numel()), rv(rw.size(), 0.0), rp = rw;
  for (int t = 0; t < 10; ++t) {
    auto [l] = step(x = xt, y = yt, w = wt, v = vt);
    auto [lp] = step_plain(x = xt, y = yt, w = w0);
    const auto g = reference_grad(rw, xt, yt), gp = reference_grad(rp, xt, yt);
    for (std::size_t i = 0; i < rw.size(); ++i) {
      rv[i] = 0.9 * rv[i] + (g[i] + 0.01 * rw[i]);
      rw[i] -= 0.05 * rv[i];
      rp[i] -= 0.05 * (gp[i] + 0.01 * rp[i]);
    }
  }
  check_rel(wt, rw);
  check_rel(vt, rv);
  check_rel(w0, rp);
}

TEST_CASE("AdamW matches PyTorch's formula over 10 steps") {
  constexpr auto m = kiln::param<"m", 2, double>();
  constexpr auto v = kiln::param<"v", 2, double>();
  constexpr auto t = kiln::input<"t", 0, double>();
  constexpr auto loss = kiln::nn::mse(kiln::matmul(x, w), y);
  auto [dw] = kiln::grad(loss, w);
  auto [am, av, aw] = kiln::nn::adamw(w, m, v, dw, t, 0.01, 0.9, 0.999, 1e-8, 0.1);
  auto step = kiln::compile(kiln::outputs(am, av, aw, loss));
  const auto xt = kiln::randn<double>({16, 6}, 4), yt = kiln::randn<double>({16, 3}, 5);
  kiln::Tensor<double> wt = kiln::randn<double>({6, 3}, 6), mt({6, 3}), vt({6, 3}), tt(kiln::Shape{});
  mt.fill(0.0);
  vt.fill(0.0);
  std::vector<double> rw(wt.data(), wt.data() + wt.numel()), rm(rw.size(), 0.0), rv(rw.size(), 0.0);
  for (int s = 1; s <= 10; ++s) {
    tt[0] = s;
    step(x = xt, y = yt, w = wt, m = mt, v = vt, t = tt);
    const auto g = reference_grad(rw, xt, yt);
    for (std::size_t i = 0; i < rw.size(); ++i) {  // torch.optim.AdamW, one parameter
      rw[i] *= 1 - 0.01 * 0.1;
      rm[i] = 0.9 * rm[i] + 0.1 * g[i];
      rv[i] = 0.999 * rv[i] + 0.001 * g[i] * g[i];
      const double c1 = 1 - std::pow(0.9, s), c2 = 1 - std::pow(0.999, s);
      rw[i] -= 0.01 / c1 * rm[i] / (std::sqrt(rv[i]) / std::sqrt(c2) + 1e-8);
    }
  }
  check_rel(wt, rw);
  check_rel(mt, rm);
  check_rel(vt, rv);
}

TEST_CASE("assign checks its target") {
  constexpr auto a = kiln::param<"a", 1>();
  auto f = kiln::compile(kiln::outputs(kiln::assign(a, a * 2.0f)));
  const kiln::Tensor<float> c({3});
  CHECK_THROWS_AS(f(a = c), kiln::BindingError);  // const: cannot be updated
  kiln::Tensor<float> at({3});
  at.fill(1.5f);
  f(a = at);
  f(a = at);
  for (std::size_t i = 0; i < 3; ++i) CHECK(at[i] == 6.0f);
}

TEST_CASE("assign writes in place where that is safe, and copies where it is not") {
  constexpr auto a = kiln::param<"a", 2>();
  constexpr auto m = kiln::param<"m", 2>();
  // a <- a + sum(a): the sum's kernel runs first; the update reads a at the element it writes.
  // m <- m + transpose(m): reads other elements of m, so it must not be written in place.
  auto f = kiln::compile<kiln::ReduceOverhead>(
      kiln::outputs(kiln::assign(a, a + kiln::sum(a)), kiln::assign(m, m + kiln::transpose(m))));
  kiln::Tensor<float> at = kiln::randn<float>({5, 7}, 1), mt = kiln::randn<float>({6, 6}, 2);
  const kiln::Tensor<float> a0 = at, m0 = mt;
  f(a = at, m = mt);
  double total = 0;
  for (std::size_t i = 0; i < a0.numel(); ++i) total += a0[i];
  for (std::size_t i = 0; i < a0.numel(); ++i) CHECK(at[i] == doctest::Approx(a0[i] + total).epsilon(1e-5));
  for (std::size_t i = 0; i < 6; ++i)
    for (std::size_t j = 0; j < 6; ++j) CHECK(mt.at({i, j}) == doctest::Approx(m0.at({i, j}) + m0.at({j, i})).epsilon(1e-6));
  const std::string plan = f.explain();
  CHECK(plan.find("assigned in place, without a copy: a (kernel") != std::string::npos);
  CHECK(plan.find(" m (kernel") == std::string::npos);
  // An updated tensor must not also be bound to another symbol.
  constexpr auto b = kiln::input<"b", 2>();
  auto g = kiln::compile(kiln::outputs(kiln::assign(a, a * 2.0f), b + 1.0f));
  CHECK_THROWS_AS(g(a = at, b = at), kiln::BindingError);
}
