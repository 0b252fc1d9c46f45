// The 16-bit element types: conversions (against an independent rounding reference), and every
// kernel kind in bf16 and f16 against float64 (dtype_cases.hpp), on the CPU and, with
// DEVICE_CASE, on the GPU; the GPU's own 16-bit cases are in cuda/cuda_dtypes.cpp.
#include <cmath>

#include "dtype_cases.hpp"
#include "on_device.hpp"

namespace {
// The value nearest to f among the representable ones, ties to the even encoding: the 16-bit
// values on either side of f are found by truncation, compared in double.
template <class S>
std::uint16_t nearest_bits(float f) {
  // candidates: every encoding whose value brackets f (scan the neighbourhood of a guess)
  std::uint16_t best = 0;
  double best_err = INFINITY;
  const std::uint16_t guess = S(f).bits;
  for (int d = -2; d <= 2; ++d) {
    const auto b = static_cast<std::uint16_t>(guess + d);
    const double v = static_cast<float>(S::from_bits(b));
    if (std::isnan(v)) continue;
    if (std::signbit(v) != std::signbit(f) && v != 0) continue;
    const double err = std::abs(v - static_cast<double>(f));
    if (err < best_err || (err == best_err && (b & 1) == 0)) best = b, best_err = err;
  }
  return best;
}
}  // namespace

TEST_CASE("bf16 and f16 conversions round to nearest even") {
  // every 16-bit encoding widens and narrows back to itself (NaNs stay NaN)
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bf = kiln::bf16::from_bits(static_cast<std::uint16_t>(b));
    const auto h = kiln::f16::from_bits(static_cast<std::uint16_t>(b));
    const float fb = static_cast<float>(bf), fh = static_cast<float>(h);
    if (std::isnan(fb)) CHECK(std::isnan(static_cast<float>(kiln::bf16(fb))));
    else CHECK(kiln::bf16(fb).bits == b);
    if (std::isnan(fh)) CHECK(std::isnan(static_cast<float>(kiln::f16(fh))));
    else CHECK(kiln::f16(fh).bits == b);
  }
  // random floats over a wide range of magnitudes, and exact ties
  const auto r = kiln::randn<double>({20000}, 7);
  for (std::size_t i = 0; i < r.numel(); ++i) {
    const float f = static_cast<float>(r[i] * std::ldexp(1.0, static_cast<int>(i % 40) - 28));
    CHECK(kiln::bf16(f).bits == nearest_bits<kiln::bf16>(f));
    if (std::abs(f) < 65504) CHECK(kiln::f16(f).bits == nearest_bits<kiln::f16>(f));
  }
  CHECK(kiln::bf16(1.0f + 0x1p-8f).bits == kiln::bf16(1.0f).bits);                 // a tie, to even
  CHECK(kiln::bf16(1.0f + 0x1p-8f + 0x1p-20f).bits == kiln::bf16(1.0f).bits + 1);  // above the tie
  CHECK(static_cast<float>(kiln::f16(65520.0f)) == INFINITY);                       // halfway past 65504
  CHECK(static_cast<float>(kiln::f16(65519.0f)) == 65504.0f);
  CHECK(static_cast<float>(kiln::f16(0x1p-24f)) == 0x1p-24f);  // the smallest subnormal
  CHECK(static_cast<float>(kiln::f16(0x1p-25f)) == 0.0f);      // half of it: a tie, to even (0)
  CHECK(std::isnan(static_cast<float>(kiln::bf16(NAN))));
}

TEST_CASE("bf16 tensors and symbols") {
  const auto t = kiln::randn<float>({3, 4}, 1);
  const auto b = t.as<kiln::bf16>();
  CHECK(b.shape() == t.shape());
  for (std::size_t i = 0; i < t.numel(); ++i) CHECK(static_cast<float>(b[i]) == doctest::Approx(t[i]).epsilon(4e-3));
  const auto back = b.as<float>();
  for (std::size_t i = 0; i < t.numel(); ++i) CHECK(back[i] == static_cast<float>(b[i]));
  // an expression's constants stay in float: 1/3 is not rounded to bf16 before the multiply
  constexpr auto x = kiln::input<"x", 1, kiln::bf16>();
  kiln::Tensor<kiln::bf16> ones({1});
  ones[0] = kiln::bf16(3.0f);
  CHECK(static_cast<float>(kiln::compile(x * (1.0 / 3.0))(x = ones)[0]) == static_cast<float>(kiln::bf16(1.0f)));
}

DEVICE_CASE("bf16 against float64", dtype_cases::all<kiln::bf16>(cases::device()))
DEVICE_CASE("f16 against float64", dtype_cases::all<kiln::f16>(cases::device()))
