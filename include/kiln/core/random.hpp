// kiln: seeded random tensors (reproducible across runs and platforms). Values are drawn on the
// host; a device other than the CPU gets a copy (the same values for the same seed).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "kiln/core/errors.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln {

namespace detail {
// splitmix64: a small, fast, well-mixed generator; element i depends only on (seed, i).
inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// Uniform in (0, 1), never 0, from the top 53 bits.
inline double unit_open(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53; }
// The largest T below hi: a draw that rounds up to hi when stored in T (a float near 1, and for
// bf16 one draw in 512 of [0, 1)) becomes this, so that rand's values stay in [lo, hi).
template <class T>
T below(T hi) {
  if constexpr (std::is_floating_point_v<T>) return std::nextafter(hi, -std::numeric_limits<T>::infinity());
  else {
    const float h = static_cast<float>(hi);
    if (h == 0.0f) return T::from_bits(0x8001);  // the smallest negative subnormal
    return T::from_bits(static_cast<std::uint16_t>(h > 0.0f ? hi.bits - 1 : hi.bits + 1));
  }
}
}  // namespace detail

// Standard normal samples (Box-Muller), reproducible for a given seed.
template <class T = float>
Tensor<T> randn(const Shape& shape, std::uint64_t seed = 0, Device device = Device::cpu()) {
  static_assert(is_float_element_v<T>, "kiln::randn: T must be a float type; integers come from kiln::randint");
  Tensor<T> t(shape);
  const std::size_t n = t.numel();
  const std::uint64_t key = detail::splitmix64(seed ^ 0x6b696c6eull);
  for (std::size_t i = 0; i < n; i += 2) {
    const double u1 = detail::unit_open(detail::splitmix64(key + 2 * i));
    const double u2 = detail::unit_open(detail::splitmix64(key + 2 * i + 1));
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    t[i] = static_cast<T>(r * std::cos(a));
    if (i + 1 < n) t[i + 1] = static_cast<T>(r * std::sin(a));
  }
  return device.is_cpu() ? t : t.to(device);
}
template <class T = float>
Tensor<T> randn(std::initializer_list<std::size_t> dims, std::uint64_t seed = 0, Device device = Device::cpu()) {
  return randn<T>(Shape(dims), seed, device);
}

// Uniform samples in [lo, hi), [0, 1) by default.
template <class T = float>
Tensor<T> rand(const Shape& shape, std::uint64_t seed = 0, T lo = T(0.0f), T hi = T(1.0f), Device device = Device::cpu()) {
  static_assert(is_float_element_v<T>, "kiln::rand: T must be a float type; integers come from kiln::randint");
  Tensor<T> t(shape);
  const std::uint64_t key = detail::splitmix64(seed ^ 0x72616e64ull);
  for (std::size_t i = 0; i < t.numel(); ++i) {
    t[i] = static_cast<T>(static_cast<double>(widen(lo)) +
                          static_cast<double>(widen(hi) - widen(lo)) * detail::unit_open(detail::splitmix64(key + i)));
    if (widen(t[i]) >= widen(hi) && widen(lo) < widen(hi)) t[i] = detail::below(hi);
  }
  return device.is_cpu() ? t : t.to(device);
}
template <class T = float>
Tensor<T> rand(std::initializer_list<std::size_t> dims, std::uint64_t seed = 0, T lo = T(0.0f), T hi = T(1.0f),
               Device device = Device::cpu()) {
  return rand<T>(Shape(dims), seed, lo, hi, device);
}
// Uniform in [0, 1) on `device`.
template <class T = float>
Tensor<T> rand(const Shape& shape, std::uint64_t seed, Device device) {
  return rand<T>(shape, seed, T(0.0f), T(1.0f), device);
}
template <class T = float>
Tensor<T> rand(std::initializer_list<std::size_t> dims, std::uint64_t seed, Device device) {
  return rand<T>(Shape(dims), seed, T(0.0f), T(1.0f), device);
}

// Integers uniform in [low, high) (torch.randint), kiln::i64 by default: token ids and
// positions for tests and examples. ValueError when the range is empty.
template <class T = i64>
Tensor<T> randint(std::int64_t low, std::int64_t high, const Shape& shape, std::uint64_t seed = 0,
                  Device device = Device::cpu()) {
  static_assert(is_index_element_v<T>, "kiln::randint: T must be kiln::i32 or kiln::i64");
  if (low >= high || (std::is_same_v<T, i32> && (low < INT32_MIN || high - 1 > INT32_MAX)))
    throw ValueError("randint: the range [" + std::to_string(low) + ", " + std::to_string(high) +
                     ") is empty or does not fit " + dtype_name<T>());
  Tensor<T> t(shape);
  const std::uint64_t key = detail::splitmix64(seed ^ 0x72696e74ull);
  const auto span = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  for (std::size_t i = 0; i < t.numel(); ++i)  // a 64-bit draw modulo span: bias below span / 2^64
    t[i] = static_cast<T>(low + static_cast<std::int64_t>(detail::splitmix64(key + i) % span));
  return device.is_cpu() ? t : t.to(device);
}

}  // namespace kiln
