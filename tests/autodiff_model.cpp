// Reverse mode: shared values, unused variables, an MLP in float32, against central finite differences in float64.
#include "gradcheck.hpp"

using namespace gradcheck;

TEST_CASE("a value used several times, and variables the loss does not use") {
  constexpr auto w = kiln::param<"w", 2, double>();
  constexpr auto v = kiln::param<"v", 1, double>();
  constexpr auto h = kiln::tanh(w);
  constexpr auto loss = kiln::sum(h * h + h);
  auto [gw, gv] = kiln::grad(loss, w, v);
  const auto wt = kiln::randn<double>({2, 3}, 10), vt = kiln::randn<double>({5}, 11);
  auto f = kiln::compile(loss);
  auto [dw, dv] = kiln::compile(kiln::outputs(gw, gv))(w = wt, v = vt);
  check("tanh used twice", dw, numeric_gradient(wt, [&](const auto& t) { return f(w = t)[0]; }));
  CHECK(dv.shape() == kiln::Shape{5});
  for (std::size_t i = 0; i < 5; ++i) CHECK(dv[i] == 0.0);
}

TEST_CASE("an MLP's gradients in float32 agree with float64") {
  const auto xt = kiln::randn<double>({16, 10}, 12), w1t = kiln::randn<double>({10, 8}, 13);
  const auto b1t = kiln::randn<double>({8}, 14), w2t = kiln::randn<double>({8, 3}, 15);
  const auto to_float = [](const kiln::Tensor<double>& t) {
    kiln::Tensor<float> f(t.shape());
    for (std::size_t i = 0; i < t.numel(); ++i) f[i] = static_cast<float>(t[i]);
    return f;
  };
  auto run = [&]<class T>(T) {
    constexpr auto x = kiln::input<"x", 2, T>();
    constexpr auto w1 = kiln::param<"w1", 2, T>();
    constexpr auto b1 = kiln::param<"b1", 1, T>();
    constexpr auto w2 = kiln::param<"w2", 2, T>();
    constexpr auto loss = kiln::mean(kiln::log_softmax(kiln::matmul(kiln::relu(kiln::matmul(x, w1) + b1), w2)));
    auto [g1, gb, g2] = kiln::grad(loss, w1, b1, w2);
    auto f = kiln::compile(kiln::outputs(loss, g1, gb, g2));
    if constexpr (std::is_same_v<T, double>) return f(x = xt, w1 = w1t, b1 = b1t, w2 = w2t);
    else return f(x = to_float(xt), w1 = to_float(w1t), b1 = to_float(b1t), w2 = to_float(w2t));
  };
  auto [ld, g1d, gbd, g2d] = run(double{});
  auto [lf, g1f, gbf, g2f] = run(float{});
  ref::check_close(lf, ref::from(ld), 1e-5, 1e-6);
  ref::check_close(g1f, ref::from(g1d), 1e-4, 1e-6);
  ref::check_close(gbf, ref::from(gbd), 1e-4, 1e-6);
  ref::check_close(g2f, ref::from(g2d), 1e-4, 1e-6);
}
