// Ops that take a shape from another value: expand_as, sum_to, reshape_as, unsqueeze, count.
// The "like" operand is read for its shape only and never computed for that.
#include "reference.hpp"

TEST_CASE("sum_to is the adjoint of broadcasting, over leading and size-1 axes") {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto b = kiln::input<"b", 1>();
  constexpr auto c = kiln::input<"c", 3>();
  constexpr auto s = kiln::input<"s", 0>();
  auto f = kiln::compile(kiln::outputs(kiln::sum_to(x * 2.0f, b), kiln::sum_to(x, c), kiln::sum_to(kiln::exp(x), s)));
  const auto xt = kiln::randn<float>({4, 3, 5}, 1), bt = kiln::randn<float>({5}, 2), ct = kiln::randn<float>({4, 1, 5}, 3);
  const auto st = kiln::randn<float>(kiln::Shape{}, 4);
  auto [sb, sc, ss] = f(x = xt, b = bt, c = ct, s = st);
  const auto rx = ref::from(xt);
  ref::check_close(sb, ref::reduce(ref::reduce(ref::map(rx, [](double v) { return 2 * v; }), 0, ref::Red::Sum, false), 0, ref::Red::Sum, false), 1e-5, 1e-5);
  ref::check_close(sc, ref::reduce(rx, 1, ref::Red::Sum, true), 1e-5, 1e-5);
  ref::check_close(ss, ref::reduce_all(ref::map(rx, [](double v) { return std::exp(v); }), ref::Red::Sum), 1e-5, 1e-5);
  // Equal shapes: a copy.
  auto g = kiln::compile(kiln::sum_to(x, x));
  ref::check_close(g(x = xt), rx);
}

TEST_CASE("sum_to checks that the target broadcasts to the operand") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto b = kiln::input<"b", 1>();
  auto f = kiln::compile(kiln::sum_to(x, b));
  const kiln::Tensor<float> xt({3, 4}), bt({5});
  CHECK_THROWS_WITH_AS(f(x = xt, b = bt), "sum_to: [5] does not broadcast to [3, 4]", kiln::ShapeError);
}

TEST_CASE("expand_as, unsqueeze, reshape_as and count") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto v = kiln::input<"v", 1>();
  auto f = kiln::compile(kiln::outputs(kiln::expand_as(v, x), kiln::unsqueeze<1>(v) * 1.0f, kiln::reshape_as(x * 2.0f, v),
                                       kiln::count<0>(x) + kiln::count(x) * 0.0f, kiln::sum<0>(x) / kiln::count<0>(x)));
  const auto xt = kiln::randn<float>({3, 4}, 5), vt = kiln::randn<float>({12}, 6);
  const auto v4 = kiln::randn<float>({4}, 7);
  CHECK_THROWS_AS(f(x = xt, v = v4), kiln::ShapeError);  // expand_as: [4] vs [3, 4] fine, reshape_as 12 vs 4 not
  constexpr auto w = kiln::input<"w", 1>();
  auto g = kiln::compile(kiln::outputs(kiln::expand_as(w, x), kiln::unsqueeze<1>(w) * 1.0f, kiln::count<0>(x) + 0.0f,
                                       kiln::count(x) + 0.0f, kiln::sum<0>(x) / kiln::count<0>(x)));
  auto [e, u, c0, c, m] = g(x = xt, w = v4);
  CHECK(e.shape() == kiln::Shape{3, 4});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(e.at({i, j}) == v4[j]);
  CHECK(u.shape() == kiln::Shape{4, 1});
  for (std::size_t j = 0; j < 4; ++j) CHECK(u[j] == v4[j]);
  CHECK(c0[0] == 3.0f);
  CHECK(c[0] == 12.0f);
  ref::check_close(m, ref::reduce(ref::from(xt), 0, ref::Red::Mean, false));
  auto h = kiln::compile(kiln::reshape_as(x * 2.0f, v));
  auto r = h(x = xt, v = vt);
  CHECK(r.shape() == kiln::Shape{12});
  for (std::size_t i = 0; i < 12; ++i) CHECK(r[i] == 2.0f * xt[i]);
}

TEST_CASE("a value read only for its shape is not computed") {
  constexpr auto x = kiln::input<"x", 2>();
  auto f = kiln::compile(kiln::sum_to(x, kiln::sum<0, true>(kiln::exp(x))));
  CHECK(f.kernel_count() == 1);  // no kernel for sum(exp(x)), only its shape is used
}
