// Forward mode: jvp against central differences along a random direction, in float64, and a
// Hessian-vector product by nesting jvp over grad.
#include "gradcheck.hpp"

namespace {

// The directional derivative of build(x) along dx, by central differences.
template <int R, class Build>
void check_jvp(const std::string& name, Build build, const kiln::Shape& shape, double lo, double hi) {
  constexpr auto x = kiln::input<"x", R, double>();
  constexpr auto dx = kiln::input<"dx", R, double>();
  constexpr auto y = build(x);
  auto f = kiln::compile(y);
  auto t = kiln::compile(kiln::jvp(y, kiln::tangent(x, dx)));
  const auto xt = kiln::rand<double>(shape, 21, lo, hi), dxt = kiln::randn<double>(shape, 22);
  kiln::Tensor<double> up = xt, down = xt;
  for (std::size_t i = 0; i < xt.numel(); ++i) {
    up[i] += gradcheck::kStep * dxt[i];
    down[i] -= gradcheck::kStep * dxt[i];
  }
  const auto yu = f(x = up), yd = f(x = down);
  std::vector<double> numeric(yu.numel());
  for (std::size_t i = 0; i < numeric.size(); ++i) numeric[i] = (yu[i] - yd[i]) / (2 * gradcheck::kStep);
  gradcheck::check(name, t(x = xt, dx = dxt), numeric);
}

}  // namespace

TEST_CASE("jvp of pointwise ops, broadcasts and reductions") {
  check_jvp<2>("exp, tanh, gelu", [](auto x) { return kiln::exp(x) * kiln::tanh(x) + kiln::gelu(x); }, {3, 5}, -2, 2);
  check_jvp<2>("div, pow, sigmoid", [](auto x) { return kiln::pow(x, 3) / (kiln::sigmoid(x) + 1); }, {3, 5}, -2, 2);
  check_jvp<2>("broadcast then reduce", [](auto x) { return kiln::sum<0>(x * kiln::sum<0, true>(x)); }, {3, 5}, -2, 2);
  check_jvp<2>("mean, max, where", [](auto x) { return kiln::where(x > 0, kiln::mean<1, true>(x), kiln::max<1, true>(x) * x); },
               {3, 5}, -2, 2);
  check_jvp<2>("softmax, log_softmax", [](auto x) { return kiln::softmax(x) + kiln::log_softmax(x * 2.0); }, {3, 5}, -2, 2);
  check_jvp<2>(
      "silu, softcap, swiglu", [](auto x) { return kiln::silu(x) + kiln::softcap(x, 1.5) + kiln::swiglu(x * 2.0, x); },
      {3, 5}, -3, 3);
  check_jvp<2>("matmul with itself, transpose", [](auto x) { return kiln::matmul(x, kiln::transpose(x)); }, {3, 5}, -1, 1);
  check_jvp<2>("reshape and unsqueeze", [](auto x) { return kiln::exp(kiln::unsqueeze<0>(kiln::reshape(x, {-1}))); }, {3, 5}, -1, 1);
}

TEST_CASE("jvp of layer_norm in every operand") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto g = kiln::param<"g", 1, double>();
  constexpr auto b = kiln::param<"b", 1, double>();
  constexpr auto dx = kiln::input<"dx", 2, double>();
  constexpr auto dg = kiln::input<"dg", 1, double>();
  constexpr auto db = kiln::input<"db", 1, double>();
  constexpr auto y = kiln::layer_norm(x, g, b, 1e-5);
  auto f = kiln::compile(y);
  auto t = kiln::compile(kiln::jvp(y, kiln::tangent(x, dx), kiln::tangent(g, dg), kiln::tangent(b, db)));
  const auto xt = kiln::randn<double>({4, 6}, 23), gt = kiln::randn<double>({6}, 24), bt = kiln::randn<double>({6}, 25);
  const auto dxt = kiln::randn<double>({4, 6}, 26), dgt = kiln::randn<double>({6}, 27), dbt = kiln::randn<double>({6}, 28);
  auto move = [&](double s) {
    kiln::Tensor<double> xs = xt, gs = gt, bs = bt;
    for (std::size_t i = 0; i < xs.numel(); ++i) xs[i] += s * dxt[i];
    for (std::size_t i = 0; i < gs.numel(); ++i) gs[i] += s * dgt[i], bs[i] += s * dbt[i];
    return f(x = xs, g = gs, b = bs);
  };
  const auto yu = move(gradcheck::kStep), yd = move(-gradcheck::kStep);
  std::vector<double> numeric(yu.numel());
  for (std::size_t i = 0; i < numeric.size(); ++i) numeric[i] = (yu[i] - yd[i]) / (2 * gradcheck::kStep);
  gradcheck::check("layer_norm", t(x = xt, g = gt, b = bt, dx = dxt, dg = dgt, db = dbt), numeric);
}

// rms_norm(x, w) and layer_norm(x, w) (no bias): the directional derivative along (dx, dw).
TEST_CASE("jvp of rms_norm and of layer_norm without a bias, in both operands") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto w = kiln::param<"w", 1, double>();
  constexpr auto dx = kiln::input<"dx", 2, double>();
  constexpr auto dw = kiln::input<"dw", 1, double>();
  const auto xt = kiln::randn<double>({4, 6}, 32), wt = kiln::randn<double>({6}, 33);
  const auto dxt = kiln::randn<double>({4, 6}, 34), dwt = kiln::randn<double>({6}, 35);
  const auto check = [&](const std::string& name, auto y) {
    auto f = kiln::compile(y);
    auto t = kiln::compile(kiln::jvp(y, kiln::tangent(x, dx), kiln::tangent(w, dw)));
    auto move = [&](double s) {
      kiln::Tensor<double> xs = xt, ws = wt;
      for (std::size_t i = 0; i < xs.numel(); ++i) xs[i] += s * dxt[i];
      for (std::size_t i = 0; i < ws.numel(); ++i) ws[i] += s * dwt[i];
      return f(x = xs, w = ws);
    };
    const auto yu = move(gradcheck::kStep), yd = move(-gradcheck::kStep);
    std::vector<double> numeric(yu.numel());
    for (std::size_t i = 0; i < numeric.size(); ++i) numeric[i] = (yu[i] - yd[i]) / (2 * gradcheck::kStep);
    gradcheck::check(name, t(x = xt, w = wt, dx = dxt, dw = dwt), numeric);
  };
  check("rms_norm", kiln::rms_norm(x, w, 1e-6));
  check("layer_norm without a bias", kiln::layer_norm(x, w, 1e-5));
}

TEST_CASE("a Hessian-vector product: jvp of grad") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto w = kiln::param<"w", 2, double>();
  constexpr auto dw = kiln::input<"dw", 2, double>();
  constexpr auto loss = kiln::sum(kiln::square(kiln::softmax(kiln::tanh(kiln::matmul(x, w)))));
  auto [gw] = kiln::grad(loss, w);
  auto hv = kiln::compile(kiln::jvp(gw, kiln::tangent(w, dw)));
  auto g = kiln::compile(gw);
  const auto xt = kiln::randn<double>({4, 5}, 29), wt = kiln::randn<double>({5, 3}, 30), dwt = kiln::randn<double>({5, 3}, 31);
  kiln::Tensor<double> up = wt, down = wt;
  for (std::size_t i = 0; i < wt.numel(); ++i) {
    up[i] += gradcheck::kStep * dwt[i];
    down[i] -= gradcheck::kStep * dwt[i];
  }
  const auto gu = g(x = xt, w = up), gd = g(x = xt, w = down);
  std::vector<double> numeric(gu.numel());
  for (std::size_t i = 0; i < numeric.size(); ++i) numeric[i] = (gu[i] - gd[i]) / (2 * gradcheck::kStep);
  gradcheck::check("Hessian-vector product", hv(x = xt, w = wt, dw = dwt), numeric);
}
