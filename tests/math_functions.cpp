// kiln::math's float functions against the C library in double, over dense sweeps.
#include "reference.hpp"

namespace {
// Largest relative error of f against g over [lo, hi], n points. A NaN from f where g is finite
// is an infinite error: std::max(worst, NaN) would keep worst and hide it (NaN < x is false).
template <class F, class G>
double max_rel_error(F f, G g, double lo, double hi, int n = 200001) {
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const float x = static_cast<float>(lo + (hi - lo) * i / (n - 1));
    const double want = g(static_cast<double>(x));
    if (want == 0 || !std::isfinite(want)) continue;
    const double err = std::abs(f(x) - want) / std::abs(want);
    worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(worst, err);
  }
  return worst;
}
}  // namespace

TEST_CASE("exp, log, tanh, erf and erfc are accurate in float") {
  using namespace kiln::math;
  CHECK(max_rel_error([](float x) { return kiln::math::exp(x); }, [](double x) { return std::exp(x); }, -87, 88) < 3e-7);
  CHECK(max_rel_error([](float x) { return kiln::math::log(x); }, [](double x) { return std::log(x); }, 1e-30, 10) < 3e-7);
  CHECK(max_rel_error([](float x) { return kiln::math::log(x); }, [](double x) { return std::log(x); }, 10, 1e30) < 3e-7);
  CHECK(max_rel_error([](float x) { return kiln::math::tanh(x); }, [](double x) { return std::tanh(x); }, -20, 20) < 5e-7);
  CHECK(max_rel_error([](float x) { return kiln::math::erf(x); }, [](double x) { return std::erf(x); }, -6, 6) < 6e-7);
  // Phi(x): absolute error (it is a probability), over the range where float resolves it.
  // A probability: never below 0 or above 1 by more than an ulp of 1 (where the sum 1/2 + x P/Q
  // rounds, far in either tail), and NaN stays NaN.
  double worst = 0;
  float lowest = 1.0f, highest = 0.0f;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -10.0f + 20.0f * i / 200000;
    const float p = kiln::math::normal_cdf(x);
    worst = std::max(worst, std::abs(p - 0.5 * std::erfc(-x / std::sqrt(2.0))));
    lowest = std::min(lowest, p);
    highest = std::max(highest, p);
  }
  CHECK(worst < 3e-7);
  CHECK(lowest == 0.0f);
  CHECK(highest <= 1.0f + 0x1p-23f);
  CHECK(kiln::math::normal_cdf(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(kiln::math::normal_cdf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(kiln::math::erf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(max_rel_error([](float x) { return kiln::math::erfc(x); }, [](double x) { return std::erfc(x); }, -4, 9) < 5e-7);
  CHECK(max_rel_error([](float x) { return kiln::math::pow(x, 2.5f); }, [](double x) { return std::pow(x, 2.5); }, 0.01, 100) < 3e-6);
}

TEST_CASE("special values follow the C library") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(kiln::math::exp(-inf) == 0.0f);
  CHECK(kiln::math::exp(inf) == inf);
  CHECK(kiln::math::exp(100.0f) == inf);
  CHECK(kiln::math::exp(0.0f) == 1.0f);
  CHECK(std::isnan(kiln::math::exp(std::nanf(""))));
  CHECK(kiln::math::log(0.0f) == -inf);
  CHECK(kiln::math::log(inf) == inf);
  CHECK(std::isnan(kiln::math::log(-1.0f)));
  CHECK(kiln::math::log(1e-40f) == doctest::Approx(std::log(1e-40)).epsilon(1e-6));  // subnormal
  CHECK(kiln::math::tanh(inf) == 1.0f);
  CHECK(kiln::math::tanh(-inf) == -1.0f);
  CHECK(kiln::math::pow(-2.0f, 3.0f) == doctest::Approx(-8.0f));
  CHECK(std::isnan(kiln::math::pow(-2.0f, 0.5f)));
  CHECK(kiln::math::pow(0.0f, 2.0f) == 0.0f);
  CHECK(kiln::math::pow(5.0f, 0.0f) == 1.0f);
}

TEST_CASE("the error measure counts a NaN result as a failure") {
  // A function that is right everywhere but one point, where it gives NaN.
  const auto nan_at_one = [](float x) { return x == 1.0f ? std::numeric_limits<float>::quiet_NaN() : x; };
  CHECK(max_rel_error(nan_at_one, [](double x) { return x; }, 0, 2, 3) == std::numeric_limits<double>::infinity());
  CHECK(max_rel_error([](float x) { return x; }, [](double x) { return x; }, 0, 2, 3) == 0.0);
}

TEST_CASE("exp at and beyond the ends of float's range agrees with the C library in double") {
  // e^x in double, rounded to float, is the reference. Below -87 kiln flushes to 0 (e^-87 is
  // 1.6e-38, next to float's smallest normal 1.18e-38), so there the result is 0 and the
  // reference below float's smallest normal; elsewhere the relative error is at most 3e-7;
  // above ln(FLT_MAX) = 88.7228 both are +inf, and NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const float xs[] = {0.0f, 1.0f, -1.0f, 80.0f, -80.0f, 88.7f, -88.7f, 88.72f, 88.8f, -87.5f, 100.0f, -100.0f,
                      1e30f, -1e30f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), inf, -inf};
  for (float x : xs) {
    INFO("x = " << x);
    const float got = kiln::math::exp(x);
    const double want = std::exp(static_cast<double>(x));
    if (static_cast<float>(want) == inf) {
      CHECK(got == inf);
    } else if (x < -87.0f) {
      CHECK(got == 0.0f);
      CHECK(want < static_cast<double>(std::numeric_limits<float>::min()));
    } else {
      CHECK(std::abs(got - want) <= 3e-7 * want);
    }
  }
  CHECK(std::isnan(kiln::math::exp(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(kiln::math::exp(-std::numeric_limits<float>::quiet_NaN())));
  // The same through the SIMD loop a pointwise kernel runs (the call is inlined into it).
  float in[64], out[64];
  for (int i = 0; i < 64; ++i) in[i] = xs[i % (sizeof xs / sizeof xs[0])];
  in[63] = std::numeric_limits<float>::quiet_NaN();
  KILN_SIMD
  for (int i = 0; i < 64; ++i) out[i] = kiln::math::exp(in[i]);
  for (int i = 0; i < 64; ++i) {
    INFO("x = " << in[i]);
    if (std::isnan(in[i])) CHECK(std::isnan(out[i]));
    else CHECK(out[i] == kiln::math::exp(in[i]));
  }
}

TEST_CASE("pow with a huge or infinite exponent is defined") {
  // Every float of magnitude 2^24 or more is an even integer: (-2)^(2^30) = +inf, (-0.5)^(2^30) = 0.
  CHECK(kiln::math::pow(-2.0f, 1073741824.0f) == std::numeric_limits<float>::infinity());
  CHECK(kiln::math::pow(-0.5f, 1073741824.0f) == 0.0f);
  CHECK(kiln::math::pow(2.0f, 1e30f) == std::numeric_limits<float>::infinity());
  CHECK(kiln::math::pow(0.5f, std::numeric_limits<float>::infinity()) == 0.0f);
}
