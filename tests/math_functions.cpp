// kiln::math's float functions against the C library in double, over dense sweeps.
#include "reference.hpp"

namespace {
// Largest relative error of f against g over [lo, hi], n points.
template <class F, class G>
double max_rel_error(F f, G g, double lo, double hi, int n = 200001) {
  double worst = 0;
  for (int i = 0; i < n; ++i) {
    const float x = static_cast<float>(lo + (hi - lo) * i / (n - 1));
    const double want = g(static_cast<double>(x));
    if (want == 0 || !std::isfinite(want)) continue;
    worst = std::max(worst, std::abs(f(x) - want) / std::abs(want));
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
