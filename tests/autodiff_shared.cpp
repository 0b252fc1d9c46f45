// Shared values and the size of derivative graphs: kiln::shared computes a value with constants
// once; kiln::grad and the optimizers make each gradient and new state one node, so the joint
// graph of a training step grows linearly with the model.
#include <kiln/expr/substitute.hpp>

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

TEST_CASE("a node over shared operands is merged by type, and its parameters stay in place") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto w = kiln::param<"w", 2, double>();
  const auto s = kiln::shared<"s">(x * 1.5);
  // matmul(s, w) holds a value (through s) but is known by its type: one node. The constants
  // after it must still reach their own nodes.
  const auto y = kiln::matmul(s, w) * 2.0 + kiln::matmul(s, w) * 3.0;
  static_assert(nodes_named<decltype(y)>("matmul") == 1);
  const auto xt = kiln::randn<double>({3, 4}, 5), wt = kiln::randn<double>({4, 2}, 6);
  const auto got = kiln::compile(y)(x = xt, w = wt);
  for (long i = 0; i < 3; ++i)
    for (long j = 0; j < 2; ++j) {
      double p = 0;
      for (long k = 0; k < 4; ++k) p += 1.5 * xt[i * 4 + k] * wt[k * 2 + j];
      CHECK(got[i * 2 + j] == doctest::Approx(5 * p).epsilon(1e-12));
    }
}

TEST_CASE("a pointwise derivative reads its computed operand once") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto w = kiln::param<"w", 2, double>();
  constexpr auto loss = kiln::sum(kiln::gelu_tanh(kiln::matmul(x, w)));
  const auto [gw] = kiln::grad(loss, w);
  // gelu_tanh's derivative reads its operand at several places: the forward product is one
  // node, and the weight's gradient x^T g the other.
  static_assert(nodes_named<decltype(gw)>("matmul") == 2);
  const auto xt = kiln::randn<double>({3, 4}, 7), wt = kiln::randn<double>({4, 2}, 8);
  auto f = kiln::compile(loss);
  check("gelu_tanh of a product", kiln::compile(gw)(x = xt, w = wt),
        numeric_gradient(wt, [&](const auto& v) { return f(x = xt, w = v)[0]; }));
}

TEST_CASE("attention's gradients read one pass of statistics") {
  constexpr auto x = kiln::input<"x", 4, double>();
  // q, k and v hold constants, so copies of them are never merged by type.
  const auto q = x * 0.5, k = x * 0.25, v = x * 2.0;
  const auto loss = kiln::sum(kiln::square(kiln::attention<kiln::AttentionMask::Causal>(q, k, v)));
  const auto [gx] = kiln::grad(loss, x);
  static_assert(nodes_named<decltype(gx)>("attention_stats") == 1);
  const auto xt = kiln::randn<double>({2, 2, 5, 4}, 12);
  auto f = kiln::compile(loss);
  check("attention, one operand", kiln::compile(gx)(x = xt),
        numeric_gradient(xt, [&](const auto& t) { return f(x = t)[0]; }));
}

TEST_CASE("shared_values lists each shared value once; replace_shared reads them back as inputs") {
  constexpr auto x = kiln::input<"x", 1, double>();
  // (a value without constants is merged by structure and is never wrapped, so a holds one)
  const auto a = kiln::shared<"a">(kiln::exp(x) * 3.0);
  const auto b = kiln::shared<"b">(a * 2.0);
  const auto y = a + b * b + a;
  using Values = decltype(kiln::shared_values(y));
  static_assert(std::tuple_size_v<Values> == 2);  // a, then b (which reads a)
  static_assert(std::tuple_element_t<0, Values>::tag != std::tuple_element_t<1, Values>::tag);
  // y with a and b read from inputs: the program computes neither exp nor the product.
  constexpr auto va = kiln::input<"va", 1, double>();
  constexpr auto vb = kiln::input<"vb", 1, double>();
  const auto z = kiln::replace_shared<Values>(y, std::tuple{va, vb});
  static_assert(nodes_named<decltype(z)>("exp") == 0);
  const auto at = kiln::randn<double>({5}, 9), bt = kiln::randn<double>({5}, 10);
  const auto got = kiln::compile(z)(va = at, vb = bt);
  for (std::size_t i = 0; i < 5; ++i) CHECK(got[i] == doctest::Approx(2 * at[i] + bt[i] * bt[i]).epsilon(1e-12));
  const auto xt = kiln::randn<double>({5}, 11);
  const auto direct = kiln::compile(y)(x = xt);
  for (std::size_t i = 0; i < 5; ++i)
    CHECK(direct[i] == doctest::Approx(6 * std::exp(xt[i]) + 36 * std::exp(2 * xt[i])).epsilon(1e-12));
}
