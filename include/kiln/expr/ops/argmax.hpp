// kiln: argmax<A>(x) and argmin<A>(x), the position of the first largest (smallest) value along
// axis A as a kiln::i64 tensor, the axis removed (argmax<A, true> keeps it with extent 1), as
// torch.argmax and torch.argmin: a NaN counts as larger (smaller) than every number, so the first
// NaN's position is the result. An empty axis gives the largest i64.
//
// A composition, one op declared from others: with x' = x moved so that A is its last axis (a
// view) and read in float (x itself when it is float or double; a cast first for bf16 and f16,
// whose 8 or 11 bits could not hold a position past 256 or 2048),
//   m = max over the axis of x',  hit_j = (x'_j >= m) or (x'_j != x'_j),
//   argmax = min over j of (hit_j ? j : inf), cast to i64.
// The max, the hits and the min are one row kernel with two stages; the positions j are a
// kernel of their own (kiln::column_index), and the cast another. Exact while the axis has
// fewer than 2^24 positions (float) or 2^53 (double). No derivative: the result is an integer.
#pragma once
#include <array>
#include <limits>
#include <utility>

#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/ops/cast.hpp"
#include "kiln/expr/ops/layout.hpp"
#include "kiln/expr/ops/pointwise.hpp"
#include "kiln/expr/ops/reduce.hpp"

namespace kiln {

namespace detail {
// The permutation moving axis A of a rank-R value to the end, the others in order.
template <int R, int A>
constexpr std::array<int, R> axis_to_end() {
  std::array<int, R> p{};
  int d = 0;
  for (int a = 0; a < R; ++a)
    if (a != A) p[static_cast<std::size_t>(d++)] = a;
  p[R - 1] = A;
  return p;
}

template <bool Largest, int Axis, bool Keep, Expression X>
constexpr auto arg_extreme(X x) {
  static_assert(X::rank >= 1, "kiln::argmax / argmin: the operand needs at least one axis");
  static_assert(Axis >= -X::rank && Axis < X::rank, "kiln::argmax / argmin: the axis is out of range for the operand's rank");
  static_assert(is_float_element_v<typename X::dtype>,
                "kiln::argmax / argmin: the operand must be a float tensor (kiln::cast<float>(x) an integer one)");
  constexpr int a = axis_index<Axis, X::rank>;
  using C = std::conditional_t<std::is_same_v<typename X::dtype, double>, double, float>;
  const auto v = permute_by<axis_to_end<X::rank, a>()>(cast<C>(x));
  const auto hit = [&] {
    if constexpr (Largest) return maximum(v >= max<-1, true>(v), not_equal(v, v));
    else return maximum(v <= min<-1, true>(v), not_equal(v, v));
  }();
  const auto first = min<-1>(where(hit, column_index(v), std::numeric_limits<C>::infinity()));
  if constexpr (Keep) return cast<i64>(unsqueeze<a>(first));
  else return cast<i64>(first);
}
}  // namespace detail

template <int Axis, bool Keep = false, Expression X>
constexpr auto argmax(X x) {
  return detail::arg_extreme<true, Axis, Keep>(x);
}
template <int Axis, bool Keep = false, Expression X>
constexpr auto argmin(X x) {
  return detail::arg_extreme<false, Axis, Keep>(x);
}

}  // namespace kiln
