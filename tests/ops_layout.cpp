// transpose and reshape: views read through strides, copies only where a contiguous value is
// needed (a reshape of a transpose, an output that is a view or an input).
#include "reference.hpp"

TEST_CASE("transpose feeds a pointwise kernel through strides") {
  constexpr auto a = kiln::input<"a", 3>();
  constexpr auto b = kiln::input<"b", 3>();
  auto f = kiln::compile(kiln::transpose(a) * 2 + b);
  CHECK(f.kernel_count() == 1);
  const auto at = kiln::randn<float>({3, 5, 7}, 71), bt = kiln::randn<float>({3, 7, 5}, 72);
  ref::check_close(f(a = at, b = bt),
                   ref::zip(ref::transpose(ref::from(at)), ref::from(bt), [](double p, double q) { return 2 * p + q; }));
}

TEST_CASE("transpose of a computed value") {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::exp(kiln::transpose(a + 1)));
  CHECK(f.kernel_count() == 2);  // a + 1 is materialised, the transpose is read by exp
  const auto at = kiln::randn<float>({40, 30}, 73);
  ref::check_close(f(a = at), ref::map(ref::transpose(ref::from(at)), [](double v) { return std::exp(v + 1); }));
}

TEST_CASE("reshape, with an inferred extent") {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::sum<1>(kiln::reshape(a * 3, {-1, 4})));
  const auto at = kiln::randn<float>({6, 8}, 74);
  auto out = f(a = at);
  CHECK(out.shape() == kiln::Shape{12});
  ref::Array r = ref::map(ref::from(at), [](double v) { return 3 * v; });
  r.shape = {12, 4};
  ref::check_close(out, ref::reduce(r, 1, ref::Red::Sum, false), 1e-5, 1e-5);
}

TEST_CASE("a reshape of a transpose copies it first") {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::reshape(kiln::transpose(a), {-1}) + 1);
  CHECK(f.kernel_count() == 2);
  const auto at = kiln::randn<float>({5, 7}, 75);
  ref::Array r = ref::map(ref::transpose(ref::from(at)), [](double v) { return v + 1; });
  r.shape = {35};
  ref::check_close(f(a = at), r);
}

TEST_CASE("outputs that are views or inputs are copied") {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::outputs(a, kiln::transpose(a), kiln::reshape(a, {2, -1})));
  const auto at = kiln::randn<float>({4, 6}, 76);
  auto [same, t, r] = f(a = at);
  ref::check_close(same, ref::from(at));
  CHECK(same.data() != at.data());
  ref::check_close(t, ref::transpose(ref::from(at)));
  CHECK(r.shape() == kiln::Shape{2, 12});
  for (std::size_t i = 0; i < at.numel(); ++i) CHECK(r[i] == at[i]);
}
