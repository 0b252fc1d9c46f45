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

// vjp: the backward of one layer given the gradient flowing into it. Two layers' vjps chained
// by hand give the whole model's gradient, and one vjp equals grad of sum(y * g).
TEST_CASE("vjp of one layer at a time equals the whole model's gradient") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto w1 = kiln::param<"w1", 2, double>();
  constexpr auto w2 = kiln::param<"w2", 2, double>();
  constexpr auto h_in = kiln::input<"h", 2, double>();  // layer 2's input, cut from layer 1
  constexpr auto g = kiln::input<"g", 2, double>();     // the gradient flowing into a layer
  constexpr auto layer1 = kiln::tanh(kiln::matmul(x, w1));
  constexpr auto layer2 = kiln::gelu(kiln::matmul(h_in, w2));
  constexpr auto loss = kiln::sum(kiln::square(kiln::gelu(kiln::matmul(layer1, w2))));

  // Whole model.
  auto [gw1, gw2] = kiln::grad(loss, w1, w2);
  auto whole = kiln::compile(kiln::outputs(gw1, gw2));
  // Layer by layer: layer 2's vjp from d loss / d out = 2 out, then layer 1's from its dh.
  auto [dh, dw2] = kiln::vjp(layer2, g, h_in, w2);
  auto back2 = kiln::compile(kiln::outputs(dh, dw2));
  auto [dw1] = kiln::vjp(layer1, g, w1);
  auto back1 = kiln::compile(dw1);
  auto fwd1 = kiln::compile(layer1);
  auto fwd2 = kiln::compile(layer2 * 2);

  const auto xt = kiln::randn<double>({6, 5}, 30), w1t = kiln::randn<double>({5, 4}, 31), w2t = kiln::randn<double>({4, 3}, 32);
  auto [want1, want2] = whole(x = xt, w1 = w1t, w2 = w2t);
  const auto h = fwd1(x = xt, w1 = w1t);
  auto [dht, dw2t] = back2(h_in = h, w2 = w2t, g = fwd2(h_in = h, w2 = w2t));
  const auto dw1t = back1(x = xt, w1 = w1t, g = dht);
  for (std::size_t i = 0; i < want2.numel(); ++i) CHECK(std::abs(dw2t[i] - want2[i]) <= 1e-12 * (1 + std::abs(want2[i])));
  for (std::size_t i = 0; i < want1.numel(); ++i) CHECK(std::abs(dw1t[i] - want1[i]) <= 1e-12 * (1 + std::abs(want1[i])));
}

TEST_CASE("vjp with a broadcast cotangent, and against grad of sum(y * g)") {
  constexpr auto w = kiln::param<"w", 2, double>();
  constexpr auto g = kiln::input<"g", 1, double>();
  constexpr auto y = kiln::exp(w) * w;
  auto [by_vjp] = kiln::vjp(y, g, w);
  auto [by_grad] = kiln::grad(kiln::sum(y * g), w);
  auto f = kiln::compile(kiln::outputs(by_vjp, by_grad));
  const auto wt = kiln::randn<double>({3, 4}, 33), gt = kiln::randn<double>({4}, 34);  // one cotangent row for every row
  auto [a, b] = f(w = wt, g = gt);
  for (std::size_t i = 0; i < a.numel(); ++i) {
    const double x = wt[i];
    CHECK(std::abs(a[i] - gt[i % 4] * (std::exp(x) * (1 + x))) <= 1e-12 * (1 + std::abs(a[i])));
    CHECK(std::abs(a[i] - b[i]) <= 1e-12 * (1 + std::abs(a[i])));
  }
  CHECK_THROWS_AS(f(w = wt, g = kiln::randn<double>({3}, 35)), kiln::ShapeError);  // [3] does not broadcast to [3, 4]
}
