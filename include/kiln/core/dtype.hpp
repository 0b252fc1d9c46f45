// kiln: element types. float and double compute in themselves; kiln::bf16 and kiln::f16 are
// 16-bit storage types that compute in float (compute_t<T>): every kernel widens on load,
// computes and accumulates in float, and rounds to nearest even once, on store.
// std::int32_t and std::int64_t (kiln::i32, kiln::i64) are index types: token ids and
// positions, read by the ops that take indices (kiln::embedding); no maths runs on them.
//
// kiln::bf16 and kiln::f16 are kiln's own structs on every compiler, bit-for-bit the layouts of
// CUDA's __nv_bfloat16 and __half. They are not aliases of CUDA's types under nvcc because a
// kernel descriptor names its element type, and the descriptor's mangled name must be the same
// in the g++-built host objects and in the nvcc-built kernel objects (docs/cuda.md, "Builds").
// Device code converts with CUDA's instructions (cuda_bf16.h, cuda_fp16.h); host code with the
// bit operations below.
#pragma once
#include <bit>
#include <cstdint>
#include <type_traits>

#include "kiln/core/config.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace kiln {

namespace detail {

KILN_HOST_DEVICE KILN_INLINE constexpr std::uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}
KILN_HOST_DEVICE KILN_INLINE constexpr float f32_from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// bf16 is the top half of a float: widening is exact. Narrowing rounds to nearest even; NaN
// stays a (quiet) NaN, overflow rounds to infinity.
KILN_HOST_DEVICE KILN_INLINE constexpr float bf16_to_f32(std::uint16_t b) { return f32_from_bits(std::uint32_t{b} << 16); }
KILN_HOST_DEVICE KILN_INLINE constexpr std::uint16_t f32_to_bf16(float f) {
#if defined(__CUDA_ARCH__)
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  const std::uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
#endif
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals below 2^-14.
KILN_HOST_DEVICE KILN_INLINE constexpr float f16_to_f32(std::uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return f32_from_bits(sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e == 0) {                                                          // zero, subnormal: m * 2^-24
    const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((e + 112) << 23) | (m << 13));
#endif
}
KILN_HOST_DEVICE KILN_INLINE constexpr std::uint16_t f32_to_f16(float f) {
#if defined(__CUDA_ARCH__)
  return __half_as_ushort(__float2half_rn(f));
#else
  std::uint32_t x = f32_bits(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));  // inf, NaN
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // from 65520 (halfway past 65504) up: inf
  if (x >= 0x38800000u)                         // a normal half: rebias the exponent, round
    return static_cast<std::uint16_t>(sign | ((x - 0x38000000u + 0xfffu + ((x >> 13) & 1u)) >> 13));
  if (x < 0x33000000u) return sign;  // below 2^-25 (2^-25 itself is a tie, to even: 0)
  // A subnormal half: m * 2^(e - 150) in units of 2^-24 is m >> (126 - e), rounded to even.
  const std::uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u, s = 126 - e;
  std::uint32_t r = m >> s;
  const std::uint32_t rest = m & ((1u << s) - 1), half = 1u << (s - 1);
  if (rest > half || (rest == half && (r & 1u))) ++r;
  return static_cast<std::uint16_t>(sign | r);
#endif
}

}  // namespace detail

// bfloat16: 8 exponent bits like float, 7 mantissa bits (about 2-3 significant digits).
struct bf16 {
  std::uint16_t bits;
  bf16() = default;
  KILN_HOST_DEVICE constexpr explicit bf16(float f) : bits(detail::f32_to_bf16(f)) {}
  KILN_HOST_DEVICE constexpr explicit operator float() const { return detail::bf16_to_f32(bits); }
  KILN_HOST_DEVICE static constexpr bf16 from_bits(std::uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
  friend constexpr bool operator==(bf16 a, bf16 b) { return float(a) == float(b); }
};

// IEEE half precision: 5 exponent bits (largest finite 65504), 10 mantissa bits.
struct f16 {
  std::uint16_t bits;
  f16() = default;
  KILN_HOST_DEVICE constexpr explicit f16(float f) : bits(detail::f32_to_f16(f)) {}
  KILN_HOST_DEVICE constexpr explicit operator float() const { return detail::f16_to_f32(bits); }
  KILN_HOST_DEVICE static constexpr f16 from_bits(std::uint16_t b) {
    f16 v;
    v.bits = b;
    return v;
  }
  friend constexpr bool operator==(f16 a, f16 b) { return float(a) == float(b); }
};

using i32 = std::int32_t;
using i64 = std::int64_t;

// The element types values are computed in, and the index types.
template <class T>
inline constexpr bool is_float_element_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>;
template <class T>
inline constexpr bool is_index_element_v = std::is_same_v<T, i32> || std::is_same_v<T, i64>;
// The element types a Tensor and a symbol may have.
template <class T>
inline constexpr bool is_element_type_v = is_float_element_v<T> || is_index_element_v<T>;

// The type kernels compute and accumulate in.
template <class T>
struct compute_type {
  using type = T;
};
template <>
struct compute_type<bf16> {
  using type = float;
};
template <>
struct compute_type<f16> {
  using type = float;
};
template <class T>
using compute_t = typename compute_type<T>::type;

// The significant bits a value stored in T keeps (the implicit bit included): the precision a
// kernel that stores T asks of its maths (kiln::math's Bits; core/math.hpp).
template <class T>
inline constexpr int significand_bits = std::is_same_v<T, double> ? 53
                                       : std::is_same_v<T, bf16>  ? 8
                                       : std::is_same_v<T, f16>   ? 11
                                       : std::is_same_v<T, i64>   ? 64
                                       : std::is_same_v<T, i32>   ? 32
                                                                  : 24;

// Load: storage to compute type (exact). Store: compute to storage type (rounded to nearest
// even for the 16-bit types).
template <class S>
KILN_HOST_DEVICE KILN_INLINE constexpr compute_t<S> widen(S x) {
  if constexpr (std::is_same_v<S, compute_t<S>>) return x;
  else return static_cast<compute_t<S>>(x);
}
template <class S>
KILN_HOST_DEVICE KILN_INLINE constexpr S narrow(compute_t<S> x) {
  if constexpr (std::is_same_v<S, compute_t<S>>) return x;
  else return S(x);
}

// Value conversion between element types (kiln::cast): float to float rounds to nearest even;
// float to integer truncates toward zero, as C++ and PyTorch do, with NaN giving 0 and values
// past the integer's range saturating to its limits (where C++ leaves the conversion undefined);
// integer to float rounds to nearest; i64 to i32 keeps the low 32 bits (two's complement, as
// PyTorch).
template <class To, class From>
KILN_HOST_DEVICE KILN_INLINE constexpr To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (is_index_element_v<To> && !is_index_element_v<From>) {
    const double v = static_cast<double>(widen(x));
    // 2^31 and 2^63 are exact doubles; the largest value below each converts without overflow.
    constexpr double top = std::is_same_v<To, i32> ? 2147483648.0 : 9223372036854775808.0;
    if (v != v) return To(0);
    if (v >= top) return std::is_same_v<To, i32> ? To(2147483647) : To(9223372036854775807LL);
    if (v < -top) return std::is_same_v<To, i32> ? To(-2147483647 - 1) : To(-9223372036854775807LL - 1);
    return static_cast<To>(v);
  } else if constexpr (is_index_element_v<To>) {
    return static_cast<To>(x);
  } else {
    return narrow<To>(static_cast<compute_t<To>>(widen(x)));
  }
}

// A readable name, for messages and explain().
template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, double>) return "f64";
  else if constexpr (std::is_same_v<T, bf16>) return "bf16";
  else if constexpr (std::is_same_v<T, f16>) return "f16";
  else if constexpr (std::is_same_v<T, i32>) return "i32";
  else return "i64";
}
// A number per element type, for constexpr comparisons (the planner's NodeInfo).
template <class T>
constexpr int dtype_code() {
  if constexpr (std::is_same_v<T, float>) return 0;
  else if constexpr (std::is_same_v<T, double>) return 1;
  else if constexpr (std::is_same_v<T, bf16>) return 2;
  else if constexpr (std::is_same_v<T, f16>) return 3;
  else if constexpr (std::is_same_v<T, i32>) return 4;
  else return 5;
}

}  // namespace kiln
