// kiln: scalar maths that vectorises. The float versions are branch-free polynomial forms
// (Cephes' constants) so that a `#pragma omp simd` loop over them becomes SIMD code; the
// double versions call the C library, which is exact to an ulp and is the reference. In CUDA
// device code the float versions call CUDA's maths library instead (expf, logf, tanhf, erfcf:
// a few ulp, and built on the special-function units, so cheaper than the polynomials and
// their divisions there), except erf, whose rational form is cheaper there too.
//
// Precision policy: the functions that have cheaper forms take Bits, the significant bits the
// result is stored with (24 for float, 53 for double; a kernel that stores bf16 asks for 8, f16
// for 11: kiln::significand_bits). On the device, a result stored in 16 bits uses the hardware's
// approximations where their error is at most a quarter of that type's rounding (half an ulp:
// 2^-9 to 2^-8 relative for bf16, 2^-12 to 2^-11 for f16): exp and sigmoid through ex2.approx
// (below 2^-16 relative for |x| < 88, the rounding of x log2 e included) for both 16-bit types,
// tanh through tanh.approx (2^-11) for bf16 only. The maths still runs in float. The bound is
// per function: a later subtraction that cancels (1 - tanh x for large x) makes it larger
// relative to its result, so ops avoid such forms (gelu_tanh is x sigmoid(2u)). Host code and
// float results ignore Bits.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/core/config.hpp"

namespace kiln::math {

#if defined(__CUDA_ARCH__)
// The special-function unit's approximations (PTX ISA, "Floating Point Instructions").
// ex2.approx.ftz: 2^x, relative error about 2^-22, results below 2^-126 flushed to 0.
__device__ __forceinline__ float ex2_approx(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// rcp.approx.ftz: 1/x within 1 ulp for normal x (subnormal x gives +-inf).
__device__ __forceinline__ float rcp_approx(float x) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
// tanh.approx (sm_75+): relative error 2^-10.987; tanh(+-inf) = +-1, NaN stays NaN.
__device__ __forceinline__ float tanh_approx(float x) {
  float r;
  asm("tanh.approx.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}
#endif

// x clamped to [-bound, bound], NaN kept: on the device two instructions (sm_80's max.NaN and
// min.NaN) instead of a compare and select per side.
KILN_HOST_DEVICE KILN_INLINE float clamp_symmetric(float x, float bound) {
#if defined(__CUDA_ARCH__)
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(x), "f"(-bound));
  asm("min.NaN.f32 %0, %0, %1;" : "+f"(r) : "f"(bound));
  return r;
#else
  return x > bound ? bound : (x < -bound ? -bound : x);
#endif
}

// Round to nearest with the 1.5 * 2^23 trick: exact for |t| < 2^22, and SIMD-friendly
// without SSE4.1's roundps.
KILN_HOST_DEVICE KILN_INLINE float round_nearest(float t) {
  const float magic = 12582912.0f;
  return (t + magic) - magic;
}

// e^(a + b) for a small correction b: 2^n e^r with n = round((a + b) log2 e) and
// r = a - n ln2 + b, |r| <= ln2/2, formed so that a's bits are not lost to rounding; e^r by
// Cephes' degree-6 polynomial (relative error about 1 ulp). 2^n is applied by adding n to the
// exponent field, exact while the result is a normal float: above 88.72 the result is +inf,
// below -87 it is flushed to 0 (e^-87 = 1.6e-38 borders the subnormals). NaN stays NaN.
// Defined for every input: n comes from x clamped to [-87, 88.7228] (NaN lands on the upper
// end, as comparisons with NaN are false), so n is a whole number in [-126, 128] and its
// conversion to int is exact; the exponent is added in unsigned arithmetic, which wraps where
// signed addition would overflow (x above about 89.4, or infinite: then y is large and the sum
// is discarded by the selects at the end). Selects only, so the SIMD loop shape is kept.
KILN_HOST_DEVICE KILN_INLINE float exp_sum(float a, float b) {
#if defined(__CUDA_ARCH__)
  return ::expf(a + b);
#endif
  const float x = a + b;
  const float xc = x < 88.7228f ? (x > -87.0f ? x : -87.0f) : 88.7228f;
  const float n = round_nearest(xc * 1.44269504088896341f);
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
  const std::uint32_t scale = static_cast<std::uint32_t>(static_cast<std::int32_t>(n)) << 23;  // n * 2^23 mod 2^32
  y = std::bit_cast<float>(std::bit_cast<std::uint32_t>(y) + scale);
  y = x < -87.0f ? 0.0f : y;
  y = x > 88.7228f ? std::numeric_limits<float>::infinity() : y;
  return x == x ? y : x;  // NaN in, NaN out
}

// e^x. On the device, for a 16-bit result: 2^(x log2 e) by ex2.approx, whose error and the
// rounding of x log2 e (|x| 2^-24 relative) stay below 2^-16 for |x| < 88.
template <int Bits = 24>
KILN_HOST_DEVICE KILN_INLINE float exp(float x) {
#if defined(__CUDA_ARCH__)
  if constexpr (Bits <= 16) return ex2_approx(x * 1.44269504088896341f);
#endif
  return exp_sum(x, -0.0f);
}

// log x = log m + e log 2 with x = m 2^e, m in [sqrt(1/2), sqrt(2)); log(1 + f) by Cephes'
// degree-9 polynomial. log 0 = -inf, log of a negative number or NaN = NaN, log inf = inf.
KILN_HOST_DEVICE KILN_INLINE float log(float x) {
#if defined(__CUDA_ARCH__)
  return ::logf(x);
#endif
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

// tanh x = x P(x^2) / Q(x^2) on |x| <= 9 (beyond, tanh is 1 in float): a rational fit
// (relative error 2e-8 in exact arithmetic, 3.5e-7 evaluated in float), one division and no
// exponential. On the device: tanhf, or tanh.approx for a bf16 result.
template <int Bits = 24>
KILN_HOST_DEVICE KILN_INLINE float tanh(float x) {
#if defined(__CUDA_ARCH__)
  if constexpr (Bits <= 8) return tanh_approx(x);
  return ::tanhf(x);
#endif
  const float c = x > 9.0f ? 9.0f : (x < -9.0f ? -9.0f : x);
  const float t = c * c;
  float p = 1.3357394857e-08f;
  p = p * t + 2.0611177760e-05f;
  p = p * t + 3.4957208883e-03f;
  p = p * t + 1.3381139304e-01f;
  p = p * t + 9.9999997988e-01f;
  float q = 7.7777131982e-07f;
  q = q * t + 3.2858480916e-04f;
  q = q * t + 2.5877493030e-02f;
  q = q * t + 4.6714455030e-01f;
  q = q * t + 1.0f;
  const float r = c * p / q;
  return x >= 9.0f ? 1.0f : (x <= -9.0f ? -1.0f : r);
}

// erf x = x P(x^2) / Q(x^2) on |x| <= 4 (beyond, erf is +-1 in float): a rational fit
// (relative error 7e-8 in exact arithmetic, 4.2e-7 evaluated in float), one division. Q >= 1
// (its coefficients are positive), so on the device the division is p * rcp.approx(q), one ulp
// more, and the whole is about 19 instructions against erff's 25 to 30 (two polynomials and
// a select); the same formula on both devices.
KILN_HOST_DEVICE KILN_INLINE float erf(float x) {
  const float c = clamp_symmetric(x, 4.0f);
  const float t = c * c;
  float p = 1.9112634503e-08f;
  p = p * t - 1.9420176127e-06f;
  p = p * t + 1.4720936587e-04f;
  p = p * t + 3.9874171190e-03f;
  p = p * t + 5.1514969924e-02f;
  p = p * t + 2.0705179806e-01f;
  p = p * t + 1.1283790956e+00f;
  float q = 1.0203430540e-03f;
  q = q * t + 1.4951696185e-02f;
  q = q * t + 1.1794020735e-01f;
  q = q * t + 5.1682614468e-01f;
  q = q * t + 1.0f;
#if defined(__CUDA_ARCH__)
  return c * p * rcp_approx(q);
#else
  return c * p / q;
#endif
}

// erfc x = t exp(-x^2 + P(t)), t = 1 / (1 + |x|/2), for x >= 0 (Numerical Recipes'
// Chebyshev fit, relative error below 1.2e-7 everywhere); erfc(-x) = 2 - erfc(x).
KILN_HOST_DEVICE KILN_INLINE float erfc(float x) {
#if defined(__CUDA_ARCH__)
  return ::erfcf(x);
#endif
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

// sigmoid x = 1 / (1 + e^-x). The denominator is at least 1, so on the GPU the reciprocal is
// the hardware's (rcp.approx: within 1 ulp over its whole range, no branch) instead of an IEEE
// division and its slow path: within 3 ulp in all, 0 where e^-x overflows (x < -88.7), as the
// CPU's flush below e^-87. For a 16-bit result e^-x is exp<Bits>'s ex2.approx.
template <int Bits = 24>
KILN_HOST_DEVICE KILN_INLINE float sigmoid(float x) {
#if defined(__CUDA_ARCH__)
  return rcp_approx(1.0f + exp<Bits>(-x));
#else
  return 1.0f / (1.0f + exp(-x));
#endif
}
template <int Bits = 53>
KILN_HOST_DEVICE inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

KILN_HOST_DEVICE KILN_INLINE float sqrt(float x) { return std::sqrt(x); }

template <int Bits = 53>
KILN_HOST_DEVICE inline double exp(double x) { return std::exp(x); }
KILN_HOST_DEVICE inline double log(double x) { return std::log(x); }
template <int Bits = 53>
KILN_HOST_DEVICE inline double tanh(double x) { return std::tanh(x); }
KILN_HOST_DEVICE inline double erf(double x) { return std::erf(x); }
KILN_HOST_DEVICE inline double erfc(double x) { return std::erfc(x); }
KILN_HOST_DEVICE inline double sqrt(double x) { return std::sqrt(x); }

// sin and cos: the C library's on the host, CUDA's accurate sinf/cosf on the device (within
// 2 ulp over the whole range; the argument reduction is exact, so large angles stay accurate).
KILN_HOST_DEVICE KILN_INLINE float sin(float x) { return std::sin(x); }
KILN_HOST_DEVICE KILN_INLINE float cos(float x) { return std::cos(x); }
KILN_HOST_DEVICE inline double sin(double x) { return std::sin(x); }
KILN_HOST_DEVICE inline double cos(double x) { return std::cos(x); }

// Phi(x), the standard normal CDF. Float: (1 + erf(x / sqrt 2)) / 2 with erf's rational fit
// above, its scalings folded into the coefficients: Phi(x) = 1/2 + x P(x^2) / Q(x^2) on
// |x| <= 4 sqrt 2 (beyond, Phi is 0 or 1 in float), P's coefficients erf's p_k / (2^k 2 sqrt 2)
// (P(0) = 1/sqrt(2 pi)), Q's q_k / 2^k. The same function as 1/2 + erf(x / sqrt 2) / 2 in exact
// arithmetic, two instructions fewer on the device (no scaling of x, no multiply by 1/2 and a
// clamp of two, less the max below; in SASS a bf16 gelu took 29 instructions a value where it had 31):
// exact gelu runs it per element, in GEMM epilogues and pointwise kernels. Its absolute error is below 3e-7
// (relative accuracy fades where Phi is tiny, x < -3). Double: erfc(-x / sqrt 2) / 2, accurate
// to an ulp everywhere.
KILN_HOST_DEVICE KILN_INLINE float normal_cdf(float x) {
  const float c = clamp_symmetric(x, 5.6568542495f);
  const float t = c * c;
  float p = 1.0558338643e-10f;
  p = p * t - 2.1456465986e-08f;
  p = p * t + 3.2528981519e-06f;
  p = p * t + 1.7622060527e-04f;
  p = p * t + 4.5533230707e-03f;
  p = p * t + 3.6601932616e-02f;
  p = p * t + 3.9894225512e-01f;
  float q = 6.3771440875e-05f;
  q = q * t + 1.8689620231e-03f;
  q = q * t + 2.9485051838e-02f;
  q = q * t + 2.5841307234e-01f;
  q = q * t + 1.0f;
  // Far in the left tail (x below about -5.3) x P / Q is -1/2 to within its rounding, and the
  // sum can come out a tiny negative number (-1.2e-7 at the clamp): it is made 0 (max.NaN keeps
  // a NaN).
#if defined(__CUDA_ARCH__)
  float r = __fmaf_rn(c * p, rcp_approx(q), 0.5f);
  asm("max.NaN.f32 %0, %0, 0f00000000;" : "+f"(r));
  return r;
#else
  const float r = c * p / q + 0.5f;
  return r < 0.0f ? 0.0f : r;
#endif
}
KILN_HOST_DEVICE inline double normal_cdf(double x) { return 0.5 * std::erfc(x * -0.70710678118654752440); }

// x^y = e^{y log|x|}, with the sign of (-1)^y for an integer y and NaN for x < 0 otherwise.
KILN_HOST_DEVICE KILN_INLINE float pow(float x, float y) {
  const float ax = x < 0.0f ? -x : x;
  float r = exp(y * log(ax));
  const float yi = round_nearest(y);
  const bool integral = yi == y;
  // Every float of magnitude 2^24 or more (and inf) is even: only smaller ones are converted to
  // int, so the conversion is always defined.
  const float ayi = yi < 0.0f ? -yi : yi;
  const bool odd = integral && (static_cast<std::int32_t>(ayi < 16777216.0f ? yi : 0.0f) & 1);
  r = (x < 0.0f && odd) ? -r : r;
  r = (x < 0.0f && !integral) ? std::numeric_limits<float>::quiet_NaN() : r;
  return y == 0.0f ? 1.0f : r;
}
KILN_HOST_DEVICE inline double pow(double x, double y) { return std::pow(x, y); }

}  // namespace kiln::math
