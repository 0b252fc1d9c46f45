// kiln: rotary position embedding in the half-rotation layout of Hugging Face's Llama, Gemma and
// GPT-NeoX (apply_rotary_pos_emb). Along the last axis, of even extent D = 2h, element j is
// paired with element j + h (j < h), and each pair is rotated by the angle p theta^(-2j/D) of
// its position p:
//   rope(x, cos, sin) = x cos + rotate_half(x) sin,   rotate_half(x) = [-x[h:], x[:h]]
// cos and sin hold cos(angle) and sin(angle) for every position and every j in [0, D), the
// angles of j and j + h being equal (HF's `cat(freqs, freqs)`); they broadcast against x (a
// [S, D] table against x of [B, H, S, D]). rope_tables() makes them.
//
// A composition: swap_halves (one axis copy) and one fused pointwise kernel; its derivatives
// come from theirs (the rotation's transpose, a rotation by -angle). The sign of rotate_half is
// a compare on the column index inside that kernel, not a table.
#pragma once
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/expr/ops/axis_copy.hpp"
#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/ops/pointwise.hpp"

namespace kiln {

template <Expression X, Expression C, Expression S>
constexpr auto rope(X x, C cos, S sin) {
  static_assert(X::rank >= 1, "kiln::rope: x needs a last axis (the head dimension) to rotate");
  static_assert(C::rank <= X::rank && S::rank <= X::rank,
                "kiln::rope: the cos and sin tables must broadcast against x, so their rank must not exceed x's");
  static_assert(std::is_same_v<typename X::dtype, typename C::dtype> && std::is_same_v<typename X::dtype, typename S::dtype>,
                "kiln::rope: x, cos and sin must have one element type (make the tables with rope_tables<T>)");
  // -sin on the first half of each row (the -x[h:] of rotate_half lands there), +sin on the second.
  const auto first_half = column_index(x) * 2 < count<-1>(x);
  return x * cos + swap_halves<-1>(x) * where(first_half, -sin, sin);
}

// The cos and sin tables of rope() for the given positions: two [positions, head_dim] tensors,
// row r for position positions[r]. The angles are computed in double and rounded once to T
// (Hugging Face computes them in float, so its tables differ from these by up to about
// p 2^-24 radians at position p). head_dim must be even and positive, theta above 1.
template <class T = float>
std::pair<Tensor<T>, Tensor<T>> rope_tables(std::span<const long> positions, long head_dim, double theta = 10000.0,
                                            Device device = Device::cpu()) {
  if (head_dim <= 0 || head_dim % 2 != 0)
    throw ValueError("kiln::rope_tables: head_dim must be even and positive, got " + std::to_string(head_dim));
  if (!(theta > 1 && std::isfinite(theta)))
    throw ValueError("kiln::rope_tables: theta must be finite and above 1, got " + std::to_string(theta));
  const std::size_t n = positions.size(), d = static_cast<std::size_t>(head_dim), h = d / 2;
  std::vector<T> c(n * d), s(n * d);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t j = 0; j < h; ++j) {
      const double angle =
          static_cast<double>(positions[r]) * std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(d));
      c[r * d + j] = c[r * d + j + h] = detail::element_from<T>(std::cos(angle));
      s[r * d + j] = s[r * d + j + h] = detail::element_from<T>(std::sin(angle));
    }
  const Shape shape{n, d};
  return {from_vector(c, shape, device), from_vector(s, shape, device)};
}

// The tables for positions 0, 1, ..., npositions - 1.
template <class T = float>
std::pair<Tensor<T>, Tensor<T>> rope_tables(long npositions, long head_dim, double theta = 10000.0,
                                            Device device = Device::cpu()) {
  if (npositions < 0) throw ValueError("kiln::rope_tables: npositions must not be negative, got " + std::to_string(npositions));
  std::vector<long> positions(static_cast<std::size_t>(npositions));
  for (long p = 0; p < npositions; ++p) positions[static_cast<std::size_t>(p)] = p;
  return rope_tables<T>(std::span<const long>(positions), head_dim, theta, device);
}

}  // namespace kiln
