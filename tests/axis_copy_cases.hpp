// concat, slice, extract and insert (the axis-copy kernel kind) against a float64 reference:
// along the first, a middle and the last axis, odd extents, sources read through strides (a
// transposed view), fused consumers, bad shapes, and gradients by finite differences. Registered
// by ops_axis_copy.cpp with DEVICE_CASE: on the CPU, and on the GPU with the inputs on the
// device (on_device.hpp).
#pragma once
#include "gradcheck.hpp"

namespace axis_copy_cases {

// The reference: the output position idx along `axis` of concat(a, b).
inline ref::Array concat(const ref::Array& a, const ref::Array& b, int axis) {
  std::vector<std::size_t> s = a.shape;
  s[axis] += b.shape[axis];
  ref::Array out = ref::zeros(s);
  for (std::size_t i = 0; i < out.numel(); ++i) {
    auto idx = ref::unravel(i, s);
    const bool first = idx[axis] < a.shape[axis];
    if (!first) idx[axis] -= a.shape[axis];
    const ref::Array& src = first ? a : b;
    out.data[i] = src.data[ref::ravel(idx, src.shape)];
  }
  return out;
}
inline ref::Array slice(const ref::Array& a, int axis, std::size_t begin, std::size_t end) {
  std::vector<std::size_t> s = a.shape;
  s[axis] = end - begin;
  ref::Array out = ref::zeros(s);
  for (std::size_t i = 0; i < out.numel(); ++i) {
    auto idx = ref::unravel(i, s);
    idx[axis] += begin;
    out.data[i] = a.data[ref::ravel(idx, a.shape)];
  }
  return out;
}

inline void concat_along_each_axis() {
  constexpr auto a = kiln::input<"a", 3>();
  constexpr auto b = kiln::input<"b", 3>();
  const auto at = cases::randn({3, 5, 7}, 301);
  auto f0 = kiln::compile(kiln::concat<0>(a, b));
  auto f1 = kiln::compile(kiln::concat<1>(a, b));
  auto f2 = kiln::compile(kiln::concat<-1>(a, b));
  CHECK(f1.kernel_count() == 1);
  const auto b0 = cases::randn({2, 5, 7}, 302), b1 = cases::randn({3, 4, 7}, 303), b2 = cases::randn({3, 5, 9}, 304);
  const auto ra = ref::from(at.cpu());
  ref::check_close(f0(a = at, b = b0).cpu(), concat(ra, ref::from(b0.cpu()), 0), 0, 0);
  ref::check_close(f1(a = at, b = b1).cpu(), concat(ra, ref::from(b1.cpu()), 1), 0, 0);
  ref::check_close(f2(a = at, b = b2).cpu(), concat(ra, ref::from(b2.cpu()), 2), 0, 0);
  // An empty operand along the axis.
  const auto e = cases::randn({3, 0, 7}, 305);
  ref::check_close(f1(a = at, b = e).cpu(), ra, 0, 0);
}

inline void concat_reads_views_and_computed_values() {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 2>();
  // The transpose is read through its strides; a + 1 is stored first; the consumer (* 2) is a
  // pointwise kernel after the copy.
  auto f = kiln::compile(kiln::concat<1>(kiln::transpose(a), b + 1) * 2);
  CHECK(f.kernel_count() == 3);
  CHECK(f.explain().find("axis copy") != std::string::npos);
  const auto at = cases::randn({13, 6}, 306), bt = cases::randn({6, 17}, 307);
  const auto want = ref::map(concat(ref::transpose(ref::from(at.cpu())), ref::map(ref::from(bt.cpu()), [](double v) { return v + 1; }), 1),
                             [](double v) { return 2 * v; });
  ref::check_close(f(a = at, b = bt).cpu(), want);
}

inline void slice_along_a_middle_and_the_last_axis() {
  constexpr auto x = kiln::input<"x", 3>();
  auto mid = kiln::compile(kiln::slice<1, 2, 7>(x));
  auto last = kiln::compile(kiln::exp(kiln::slice<2, 3, 4>(x)));
  const auto xt = cases::randn({4, 9, 11}, 308);
  const auto rx = ref::from(xt.cpu());
  ref::check_close(mid(x = xt).cpu(), slice(rx, 1, 2, 7), 0, 0);
  ref::check_close(last(x = xt).cpu(), ref::map(slice(rx, 2, 3, 4), [](double v) { return std::exp(v); }));
}

inline void bad_shapes_are_errors() {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 2>();
  auto f = kiln::compile(kiln::concat<0>(a, b));
  const auto at = cases::randn({3, 5}, 309), bt = cases::randn({2, 6}, 310);
  CHECK_THROWS_WITH_AS(f(a = at, b = bt), doctest::Contains("concat along axis 0: shapes [3, 5] and [2, 6]"), kiln::ShapeError);
  auto s = kiln::compile(kiln::slice<1, 2, 9>(a));
  CHECK_THROWS_WITH_AS(s(a = at), doctest::Contains("ends past the axis"), kiln::ShapeError);
}

inline void a_16_bit_concat() {
  constexpr auto a = kiln::input<"a", 2, kiln::bf16>();
  constexpr auto b = kiln::input<"b", 2, kiln::bf16>();
  auto f = kiln::compile(kiln::concat<1>(a, b));
  const auto at = cases::randn({7, 33}, 311).as<kiln::bf16>(), bt = cases::randn({7, 5}, 312).as<kiln::bf16>();
  ref::check_close(f(a = at, b = bt).cpu(), concat(ref::from(at.cpu()), ref::from(bt.cpu()), 1), 0, 0);
}

// Reverse mode by finite differences: concat (each operand), slice, and extract and insert as
// what they are the derivatives of (a gradient of a gradient).
inline void gradients() {
  gradcheck::binary<2, 2>("concat<0>", [](auto a, auto b) { return kiln::tanh(kiln::concat<0>(a, b)); }, {3, 4}, {2, 4}, -1, 1);
  gradcheck::binary<3, 3>("concat<2>", [](auto a, auto b) { return kiln::concat<2>(a * b, kiln::exp(b)); }, {2, 3, 4},
                          {2, 3, 4}, -1, 1);
  gradcheck::unary<3>("slice<1>", [](auto x) { return kiln::square(kiln::slice<1, 1, 3>(x)); }, {2, 5, 3}, -1, 1);
  gradcheck::unary<2>("slice<1> of a product", [](auto x) { return kiln::slice<1, 2, 5>(kiln::matmul(x, kiln::transpose(x))); },
                      {5, 3}, -1, 1);
  // insert is slice's gradient, extract concat's: differentiate them too.
  gradcheck::binary<2, 2>("insert", [](auto a, auto b) { return kiln::square(kiln::insert<0, 1>(a, b)) + b; }, {2, 3}, {5, 3},
                          -1, 1);
  gradcheck::binary<2, 2>("extract", [](auto a, auto b) { return kiln::exp(kiln::extract<1, 1>(a, b)) * b; }, {3, 6}, {3, 4},
                          -1, 1);
}

// A fused QKV projection's output split three ways, along the last axis and along the first.
inline void chunk_and_split() {
  constexpr auto x = kiln::input<"x", 3>();
  auto [q, k, v] = kiln::chunk<3, -1>(x);
  auto parts = kiln::compile(kiln::outputs(q, k * 2, v));
  auto [p0, p1] = kiln::chunk<2, 0>(x);
  auto rows = kiln::compile(p0 - p1);
  auto [head, tail] = kiln::split<1, 1, 3>(x);
  auto split = kiln::compile(kiln::outputs(head, tail));
  const auto xt = cases::randn({4, 5, 12}, 313);
  const auto rx = ref::from(xt.cpu());
  auto [qt, kt, vt] = parts(x = xt);
  ref::check_close(qt.cpu(), slice(rx, 2, 0, 4), 0, 0);
  ref::check_close(kt.cpu(), ref::map(slice(rx, 2, 4, 8), [](double e) { return 2 * e; }), 0, 0);
  ref::check_close(vt.cpu(), slice(rx, 2, 8, 12), 0, 0);
  ref::check_close(rows(x = xt).cpu(), ref::zip(slice(rx, 0, 0, 2), slice(rx, 0, 2, 4), [](double a, double b) { return a - b; }));
  auto [ht, tt] = split(x = xt);
  ref::check_close(ht.cpu(), slice(rx, 1, 0, 1), 0, 0);
  ref::check_close(tt.cpu(), slice(rx, 1, 1, 4), 0, 0);
  // The extent is the shapes' business, not the type's: the same program splits 3 x 7 as well.
  const auto wide = cases::randn({2, 3, 21}, 314);
  ref::check_close(std::get<2>(parts(x = wide)).cpu(), slice(ref::from(wide.cpu()), 2, 14, 21), 0, 0);
  CHECK_THROWS_WITH_AS(parts(x = cases::randn({2, 3, 10}, 315)),
                       doctest::Contains("chunk into 3 parts along axis 2 of shape [2, 3, 10]"), kiln::ShapeError);
  CHECK_THROWS_WITH_AS(split(x = cases::randn({2, 3, 8}, 316)), doctest::Contains("ends past the axis"), kiln::ShapeError);
}

// concat_parts: chunk's inverse, one kernel; parts of different shapes are a ShapeError. The
// gradient of a value whose every chunk is used is the parts' gradients concatenated in one
// kernel (kiln::autodiff::sum_of_parts), not one zero-filled copy of the value per part and their sum;
// with a part unused, the placed parts' sum (zeros where the unused part was).
inline void concat_parts_and_the_gradient_of_every_chunk() {
  constexpr auto a = kiln::input<"a", 3>();
  constexpr auto b = kiln::input<"b", 3>();
  constexpr auto c = kiln::input<"c", 3>();
  auto f = kiln::compile(kiln::concat_parts<1>(a, kiln::exp(b), c));
  const auto at = cases::randn({2, 3, 4}, 325), bt = cases::randn({2, 3, 4}, 326), ct = cases::randn({2, 3, 4}, 327);
  const auto ra = ref::from(at.cpu()), rb = ref::map(ref::from(bt.cpu()), [](double e) { return std::exp(e); });
  ref::check_close(f(a = at, b = bt, c = ct).cpu(), concat(concat(ra, rb, 1), ref::from(ct.cpu()), 1), 1e-6, 1e-6);
  CHECK_THROWS_WITH_AS(f(a = at, b = bt, c = cases::randn({2, 3, 5}, 328)),
                       doctest::Contains("concat_parts along axis 1: parts of shapes [2, 3, 4] and [2, 3, 5]"), kiln::ShapeError);

  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto y = kiln::input<"y", 2>();
  const auto parts_loss = [](auto v, auto w) {
    auto [q, k, u] = kiln::chunk<3, -1>(kiln::matmul(v, w));
    return kiln::sum(kiln::tanh(q) * k + kiln::exp(u));
  };
  auto g = kiln::compile(std::get<0>(kiln::grad(parts_loss(x, y), x)));
  const std::string plan = g.explain();
  CHECK(plan.find("concat_parts") != std::string::npos);
  CHECK(plan.find("chunk_insert") == std::string::npos);
  const auto xt = cases::randn({5, 4}, 329), yt = cases::randn({4, 9}, 330);
  // d/dP of sum(tanh(q) k + exp(u)), P = x y = [q k u]: [(1 - tanh^2 q) k, tanh q, exp u]; dx = dP y^T.
  const auto rp = ref::matmul(ref::from(xt.cpu()), ref::from(yt.cpu()));
  ref::Array dp = ref::zeros({5, 9});
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      const double q = rp.data[i * 9 + j], k = rp.data[i * 9 + 3 + j], u = rp.data[i * 9 + 6 + j];
      dp.data[i * 9 + j] = (1 - std::tanh(q) * std::tanh(q)) * k;
      dp.data[i * 9 + 3 + j] = std::tanh(q);
      dp.data[i * 9 + 6 + j] = std::exp(u);
    }
  ref::check_close(g(x = xt, y = yt).cpu(), ref::matmul(dp, ref::transpose(ref::from(yt.cpu()))), 1e-4, 1e-4);

  // Two of three parts used: the sum of the placed parts, zeros for the third.
  gradcheck::unary<2>("chunk<3, -1>, a part unused", [](auto v) {
    auto [q, k, u] = kiln::chunk<3, -1>(v);
    return q * kiln::exp(u);
  }, {2, 9}, -1, 1);
  gradcheck::binary<3, 3>("concat_parts<-1>", [](auto v, auto w) { return kiln::tanh(kiln::concat_parts<-1>(v * w, kiln::exp(v))); },
                          {2, 3, 2}, {2, 3, 2}, -1, 1);
}

// Positions known when the expression is built (a model's configuration, a cache position on
// the host), not when the code is compiled.
inline void slice_extract_insert_at_run_time_positions() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto y = kiln::input<"y", 3>();
  long begin = 2, end = 7;
  auto s = kiln::compile(kiln::slice<1>(x, begin, end) * 2);
  auto e = kiln::compile(kiln::extract<-1>(x, 3, y));
  auto i = kiln::compile(kiln::insert<0>(y, 1, x));
  const auto xt = cases::randn({4, 9, 11}, 317), yt = cases::randn({4, 9, 5}, 318);
  const auto rx = ref::from(xt.cpu()), ry = ref::from(yt.cpu());
  ref::check_close(s(x = xt).cpu(), ref::map(slice(rx, 1, 2, 7), [](double v) { return 2 * v; }), 0, 0);
  ref::check_close(e(x = xt, y = yt).cpu(), slice(rx, 2, 3, 8), 0, 0);
  const auto small = cases::randn({2, 9, 11}, 319);
  const auto got = i(y = small, x = xt).cpu();  // small placed at rows 1, 2 of x's shape, 0 elsewhere
  REQUIRE(got.shape() == xt.shape());
  const auto hs = small.cpu();
  for (std::size_t k = 0; k < got.numel(); ++k) {
    const std::size_t row = k / 99;
    CHECK(got[k] == (row >= 1 && row < 3 ? hs[k - 99] : 0.0f));
  }
  begin = 5;
  end = 12;
  auto past = kiln::compile(kiln::slice<1>(x, begin, end));
  CHECK_THROWS_WITH_AS(past(x = xt), doctest::Contains("slice [5, 12) along axis 1 of shape [4, 9, 11]"), kiln::ShapeError);
  auto backwards = kiln::compile(kiln::slice<1>(x, 4L, 3L));
  CHECK_THROWS_AS(backwards(x = xt), kiln::ShapeError);
  auto negative = kiln::compile(kiln::extract<-1>(x, -1, y));
  CHECK_THROWS_AS(negative(x = xt, y = yt), kiln::ShapeError);
}

inline void chunk_gradients() {
  gradcheck::unary<2>("chunk<3, -1>", [](auto x) {
    auto [a, b, c] = kiln::chunk<3, -1>(x);
    return a * b + kiln::exp(c);
  }, {2, 9}, -1, 1);
  gradcheck::unary<3>("split<0, 1, 2>", [](auto x) {
    auto [a, b] = kiln::split<0, 1, 2>(x);
    return kiln::tanh(a) * b;
  }, {3, 2, 4}, -1, 1);
  gradcheck::unary<2>("slice<1>(x, 1, 4)", [](auto x) { return kiln::exp(kiln::slice<1>(x, 1, 4)); }, {3, 6}, -1, 1);
  gradcheck::binary<2, 2>("insert<0>(a, 2, b)", [](auto a, auto b) { return kiln::square(kiln::insert<0>(a, 2, b)) * b; },
                          {2, 3}, {5, 3}, -1, 1);
}

}  // namespace axis_copy_cases
