// Shared values and the size of derivative graphs: kiln::shared computes a value with constants
// once; kiln::grad and the optimizers make each gradient and new state one node, so the joint
// graph of a training step grows linearly with the model.
#include "gradcheck.hpp"

using namespace gradcheck;

namespace {
template <class Root>
constexpr int nodes_named(const char* name) {
  using G = kiln::graph::graph_of<Root>;
  int n = 0;
  for (int i = 0; i < G::size; ++i) n += std::string_view(G::info.nodes[i].name) == name;
  return n;
}
template <class Root>
constexpr int nodes() {
  return kiln::graph::graph_of<Root>::size;
}
}  // namespace

TEST_CASE("kiln::shared makes a value with constants one node") {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto plain = x * 2.0f;  // holds a constant: two occurrences are two nodes
  constexpr auto once = kiln::shared<"twice_x">(x * 2.0f);
  static_assert(nodes<decltype(plain + plain)>() == 6);  // x, 2, *, 2, *, +
  static_assert(nodes<decltype(once + once)>() == 4);    // x, 2, *, +
  const auto xt = kiln::randn<float>({7}, 1);
  const auto y = kiln::compile(once * once + once)(x = xt);
  for (std::size_t i = 0; i < 7; ++i) CHECK(y[i] == doctest::Approx(4 * xt[i] * xt[i] + 2 * xt[i]).epsilon(1e-6));
}

TEST_CASE("two different values under one name are refused at compile()") {
  constexpr auto x = kiln::input<"x", 1>();
  const auto a = kiln::shared<"s">(x * 2.0f), b = kiln::shared<"s">(x * 3.0f);
  CHECK_THROWS_AS(kiln::compile(a + b), kiln::BindingError);
  const auto c = kiln::shared<"s">(x * 2.0f);  // the same value again is fine
  const auto xt = kiln::randn<float>({3}, 2);
  const auto y = kiln::compile(a + c)(x = xt);
  CHECK(y[0] == doctest::Approx(4 * xt[0]));
}

TEST_CASE("two kiln::grad calls of equal structure: a collision is reported, a salt separates them") {
  constexpr auto w = kiln::param<"w", 1>();
  const auto [g1] = kiln::grad(kiln::sum(kiln::square(w * 2.0f)), w);
  const auto [g2] = kiln::grad(kiln::sum(kiln::square(w * 3.0f)), w);
  CHECK_THROWS_AS(kiln::compile(kiln::outputs(g1, g2)), kiln::BindingError);
  // The differing constant one Shared value deeper (the cotangent of exp(w) * c is c times the
  // upstream cotangent, itself a Shared value): still reported.
  const auto [h1] = kiln::grad(kiln::sum(kiln::exp(w) * 2.0f), w);
  const auto [h2] = kiln::grad(kiln::sum(kiln::exp(w) * 3.0f), w);
  CHECK_THROWS_AS(kiln::compile(kiln::outputs(h1, h2)), kiln::BindingError);
  const auto [g3] = kiln::grad<1>(kiln::sum(kiln::square(w * 3.0f)), w);
  const auto wt = kiln::randn<float>({4}, 3);
  auto [d1, d3] = kiln::compile(kiln::outputs(g1, g3))(w = wt);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(d1[i] == doctest::Approx(8 * wt[i]).epsilon(1e-5));   // d/dw (2w)^2
    CHECK(d3[i] == doctest::Approx(18 * wt[i]).epsilon(1e-5));  // d/dw (3w)^2
  }
}

TEST_CASE("an MLP training step: each gradient is computed once, however often it is used") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto y = kiln::input<"y", 2>();
  constexpr auto t = kiln::input<"t", 0>();
  constexpr auto w1 = kiln::param<"w1", 2>();
  constexpr auto b1 = kiln::param<"b1", 1>();
  constexpr auto w2 = kiln::param<"w2", 2>();
  constexpr auto m1 = kiln::param<"m1", 2>();
  constexpr auto v1 = kiln::param<"v1", 2>();
  constexpr auto m2 = kiln::param<"m2", 2>();
  constexpr auto v2 = kiln::param<"v2", 2>();
  constexpr auto logits = kiln::matmul(kiln::relu(kiln::matmul(x, w1) + b1), w2);
  constexpr auto loss = kiln::nn::cross_entropy(logits, y);
  const auto [g1, gb, g2] = kiln::grad(loss, w1, b1, w2);
  using Joint = decltype(kiln::outputs(loss, g1, gb, g2));
  // Forward: 2 matmuls; backward: d logits -> dW2 and d hidden, d hidden -> dW1. Five in all
  // (a tree walk would repeat the backward chain in each gradient).
  static_assert(nodes_named<Joint>("matmul") == 5);
  // Reverse mode costs a constant factor of the forward graph.
  static_assert(nodes<Joint>() <= 3 * nodes<decltype(loss)>());
  // AdamW reads each gradient three times and each new moment twice: still 5 matmuls.
  const auto [a1, a2, a3] = kiln::nn::adamw(w1, m1, v1, g1, t, 1e-3);
  const auto [a4, a5, a6] = kiln::nn::adamw(w2, m2, v2, g2, t, 1e-3);
  using Step = decltype(kiln::outputs(loss, a1, a2, a3, a4, a5, a6));
  static_assert(nodes_named<Step>("matmul") == 5);
  static_assert(nodes_named<Step>("sqrt") == 2);  // one AdamW denominator per weight
}

TEST_CASE("a shared value inside a differentiated expression") {
  constexpr auto w = kiln::param<"w", 2, double>();
  const auto h = kiln::shared<"h">(kiln::tanh(w * 0.5));
  const auto loss = kiln::sum(h * h * h + h);
  const auto [gw] = kiln::grad(loss, w);
  const auto wt = kiln::randn<double>({3, 4}, 4);
  auto f = kiln::compile(loss);
  check("shared tanh", kiln::compile(gw)(w = wt), numeric_gradient(wt, [&](const auto& v) { return f(w = v)[0]; }));
}
