// kiln::dropout against its definition computed here from kiln::philox (whose Philox4x32-10 is
// checked against Random123's published known answers): every element's keep-or-drop and
// scale, on both devices with the same bits; the kept fraction and the mean within statistical
// bounds; x read through strides (the mask follows the output's order); seeds, offsets and
// streams that change the mask; bf16; the gradient against finite differences; evaluation's
// identity; and a bad rng shape. Registered by ops_dropout.cpp with DEVICE_CASE.
#pragma once
#include <cmath>
#include <cstdint>

#include "gradcheck.hpp"

namespace dropout_cases {

inline kiln::Tensor<kiln::i64> rng(std::int64_t seed, std::int64_t offset) {
  return kiln::from_vector<kiln::i64>({seed, offset}, kiln::Shape{2}).to(cases::device());
}

// y[i] = x[i] / (1 - p) where uniform(seed, offset, stream, i) >= p, else 0: exact for f32 (the
// same float product), checked to rounding for bf16.
template <class T>
void check_mask(const kiln::Tensor<T>& y, const std::vector<double>& x, double p, std::int64_t seed, std::int64_t offset,
                std::uint32_t stream, double tol) {
  const auto yc = y.cpu();
  REQUIRE(yc.numel() == x.size());
  const auto scale = static_cast<kiln::compute_t<T>>(1.0 / (1.0 - p));
  int bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const bool keep = kiln::philox::uniform(static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(offset), stream, i) >=
                      static_cast<float>(p);
    const double want = keep ? static_cast<double>(static_cast<kiln::compute_t<T>>(x[i]) * scale) : 0.0;
    const double got = static_cast<double>(kiln::widen(yc[i]));
    bad += !(std::abs(got - want) <= tol * std::abs(want));
  }
  CHECK(bad == 0);
}

inline std::vector<double> values(const kiln::Tensor<float>& t) {
  const auto c = t.cpu();
  std::vector<double> v(c.numel());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = c[i];
  return v;
}

inline void masks_follow_the_definition() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto r = kiln::input<"rng", 1, kiln::i64>();
  auto f = kiln::compile(kiln::dropout<0.3>(x, r));
  auto g = kiln::compile(kiln::dropout<0.3, true, 7>(x, r));  // another stream
  const auto xt = cases::randn({37, 61}, 1001);
  const auto xv = values(xt);
  check_mask(f(x = xt, r = rng(42, 0)), xv, 0.3, 42, 0, 0, 0);
  check_mask(f(x = xt, r = rng(42, 1000)), xv, 0.3, 42, 1000, 0, 0);
  check_mask(f(x = xt, r = rng(-5, 3)), xv, 0.3, -5, 3, 0, 0);
  check_mask(g(x = xt, r = rng(42, 0)), xv, 0.3, 42, 0, 7, 0);
  // The streams, seeds and offsets give different masks.
  const auto a = f(x = xt, r = rng(42, 0)).cpu(), b = g(x = xt, r = rng(42, 0)).cpu(), c = f(x = xt, r = rng(43, 0)).cpu();
  int same_ab = 0, same_ac = 0;
  for (std::size_t i = 0; i < a.numel(); ++i) {
    same_ab += (a[i] == 0) == (b[i] == 0);
    same_ac += (a[i] == 0) == (c[i] == 0);
  }
  CHECK(same_ab < static_cast<int>(a.numel()) * 3 / 4);  // independent masks agree on 0.7^2 + 0.3^2 = 58%
  CHECK(same_ac < static_cast<int>(a.numel()) * 3 / 4);
}

// Over 2^20 elements of ones, the kept fraction is 1 - p within 6 standard deviations
// (sqrt(p (1 - p) / n) = 0.00045), and the mean stays 1.
inline void kept_fraction_and_mean() {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto r = kiln::input<"rng", 1, kiln::i64>();
  auto f = kiln::compile(kiln::outputs(kiln::mean(kiln::dropout<0.25>(x, r)), kiln::mean(kiln::dropout<0.25>(x, r) > 0.0f)));
  const std::size_t n = std::size_t{1} << 20;
  const auto [mean, kept] = f(x = kiln::ones<float>({n}).to(cases::device()), r = rng(2024, 77));
  CHECK(std::abs(kept.cpu()[0] - 0.75) < 6 * 0.00045);
  CHECK(std::abs(mean.cpu()[0] - 1.0) < 6 * 0.00045 / 0.75);
}

// x transposed: element i of the output (row-major) draws number i.
inline void strided_operands_and_bf16() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto r = kiln::input<"rng", 1, kiln::i64>();
  auto f = kiln::compile(kiln::dropout<0.5>(kiln::transpose(x), r));
  const auto xt = cases::randn({13, 29}, 1002);
  std::vector<double> xv(13 * 29);
  const auto xc = xt.cpu();
  for (std::size_t i = 0; i < 29; ++i)
    for (std::size_t j = 0; j < 13; ++j) xv[i * 13 + j] = xc[j * 29 + i];
  check_mask(f(x = xt, r = rng(9, 9)), xv, 0.5, 9, 9, 0, 0);

  constexpr auto h = kiln::input<"h", 2, kiln::bf16>();
  auto fb = kiln::compile(kiln::dropout<0.1>(h, r));
  const auto ht = kiln::randn<kiln::bf16>({8, 100}, 1003);
  std::vector<double> hv(800);
  for (std::size_t i = 0; i < 800; ++i) hv[i] = static_cast<double>(kiln::widen(ht[i]));
  check_mask(fb(h = ht.to(cases::device()), r = rng(1, 2)), hv, 0.1, 1, 2, 0, 1.0 / 256);
}

// d/dx sum(dropout(x) * w) against central differences (the mask is fixed by rng), and the
// identity in evaluation.
inline void gradient_and_evaluation() {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto w = kiln::input<"w", 2, double>();
  constexpr auto r = kiln::input<"rng", 1, kiln::i64>();
  constexpr auto loss = kiln::sum(kiln::dropout<0.4>(kiln::tanh(x), r) * w);
  auto value = kiln::compile(loss);
  auto [gx] = kiln::grad(loss, x);
  auto grad = kiln::compile(gx);
  const auto xt = kiln::randn<double>({6, 7}, 1004), wt = kiln::randn<double>({6, 7}, 1005);
  const auto rt = kiln::from_vector<kiln::i64>({11, 5}, kiln::Shape{2});
  const auto dev = cases::device();
  gradcheck::check("dropout", grad(x = xt.to(dev), w = wt.to(dev), r = rt.to(dev)).cpu(),
                   gradcheck::numeric_gradient(xt, [&](const auto& v) { return value(x = v, w = wt, r = rt)[0]; }));
  constexpr auto eval = kiln::dropout<0.4, false>(x, r);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(eval)>, std::remove_cvref_t<decltype(x)>>,
                "dropout in evaluation is the identity");
  auto bad = kiln::compile(kiln::dropout<0.4>(x, r));
  CHECK_THROWS_WITH_AS(bad(x = xt.to(dev), r = kiln::from_vector<kiln::i64>({1, 2, 3}, kiln::Shape{3}).to(dev)),
                       doctest::Contains("dropout: rng must have shape [2], (seed, offset), not [3]"), kiln::ShapeError);
}

}  // namespace dropout_cases
