// kiln: scalar maths that vectorises. The float versions are branch-free polynomial forms
// (Cephes' constants) so that a `#pragma omp simd` loop over them becomes SIMD code; the
// double versions call the C library, which is exact to an ulp and is the reference.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/core/config.hpp"

namespace kiln::math {

// Round to nearest with the 1.5 * 2^23 trick: exact for |t| < 2^22, and SIMD-friendly
// without SSE4.1's roundps.
KILN_HOST_DEVICE KILN_INLINE float round_nearest(float t) {
  const float magic = 12582912.0f;
  return (t + magic) - magic;
}

// e^(a + b) for a small correction b: 2^n e^r with n = round((a + b) log2 e) and
// r = a - n ln2 + b, |r| <= ln2/2, formed so that a's bits are not lost to rounding; e^r by
// Cephes' degree-6 polynomial (relative error about 1 ulp). 2^n is applied as two factors so
// n = 128 does not overflow the exponent field. Below -87.34 the result is flushed to 0.
KILN_HOST_DEVICE KILN_INLINE float exp_sum(float a, float b) {
  const float x = a + b;
  const float n = round_nearest((x > 88.7228f ? 88.7228f : (x < -87.3365f ? -87.3365f : x)) * 1.44269504088896341f);
  float r = a - n * 0.693359375f;
  r = r - n * -2.12194440e-4f + b;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const std::int32_t ni = static_cast<std::int32_t>(n);
  const std::int32_t n1 = ni >> 1, n2 = ni - n1;
  y *= std::bit_cast<float>((n1 + 127) << 23);
  y *= std::bit_cast<float>((n2 + 127) << 23);
  y = x < -87.3365f ? 0.0f : y;
  y = x > 88.7228f ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

KILN_HOST_DEVICE KILN_INLINE float exp(float x) { return exp_sum(x, -0.0f); }

// log x = log m + e log 2 with x = m 2^e, m in [sqrt(1/2), sqrt(2)); log(1 + f) by Cephes'
// degree-9 polynomial. log 0 = -inf, log of a negative number or NaN = NaN, log inf = inf.
KILN_HOST_DEVICE KILN_INLINE float log(float x) {
  const bool subnormal = x < 1.17549435e-38f;
  const float xs = subnormal ? x * 8388608.0f : x;  // scale subnormals by 2^23
  const std::int32_t bits = std::bit_cast<std::int32_t>(xs);
  float e = static_cast<float>(((bits >> 23) & 0xff) - 126) - (subnormal ? 23.0f : 0.0f);
  float m = std::bit_cast<float>((bits & 0x007fffff) | 0x3f000000);  // m in [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1.0f : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y += -2.12194440e-4f * e;
  y += -0.5f * z;
  float r = m + y + 0.693359375f * e;
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  r = x == 0.0f ? -std::numeric_limits<float>::infinity() : r;
  return (x < 0.0f || x != x) ? std::numeric_limits<float>::quiet_NaN() : r;
}

// tanh x: Cephes' odd polynomial for |x| < 0.625, else 1 - 2 / (e^{2|x|} + 1) with the sign.
KILN_HOST_DEVICE KILN_INLINE float tanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  const float big = 1.0f - 2.0f / (exp(2.0f * ax) + 1.0f);
  return ax < 0.625f ? small : (x < 0.0f ? -big : big);
}

// erfc x = t exp(-x^2 + P(t)), t = 1 / (1 + |x|/2), for x >= 0 (Numerical Recipes'
// Chebyshev fit, relative error below 1.2e-7 everywhere); erfc(-x) = 2 - erfc(x).
KILN_HOST_DEVICE KILN_INLINE float erfc(float x) {
  const float z = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  // -z^2 = -zh^2 - (2 zh + zl) zl with zh the top 12 bits of z: zh^2 is exact in float, so the
  // large part of the exponent keeps every bit (the tail of erfc stays accurate to ~1e-7).
  const float zh = std::bit_cast<float>(std::bit_cast<std::int32_t>(z) & static_cast<std::int32_t>(0xfffff000u));
  const float zl = z - zh;
  const float r = t * exp_sum(-zh * zh, p - (zh + zh + zl) * zl);
  return x < 0.0f ? 2.0f - r : r;
}

KILN_HOST_DEVICE KILN_INLINE float sqrt(float x) { return std::sqrt(x); }

inline double exp(double x) { return std::exp(x); }
inline double log(double x) { return std::log(x); }
inline double tanh(double x) { return std::tanh(x); }
inline double erfc(double x) { return std::erfc(x); }
inline double sqrt(double x) { return std::sqrt(x); }

// x^y = e^{y log|x|}, with the sign of (-1)^y for an integer y and NaN for x < 0 otherwise.
KILN_HOST_DEVICE KILN_INLINE float pow(float x, float y) {
  const float ax = x < 0.0f ? -x : x;
  float r = exp(y * log(ax));
  const float yi = round_nearest(y);
  const bool integral = yi == y;
  const bool odd = integral && (static_cast<std::int32_t>(yi) & 1);
  r = (x < 0.0f && odd) ? -r : r;
  r = (x < 0.0f && !integral) ? std::numeric_limits<float>::quiet_NaN() : r;
  return y == 0.0f ? 1.0f : r;
}
inline double pow(double x, double y) { return std::pow(x, y); }

}  // namespace kiln::math
