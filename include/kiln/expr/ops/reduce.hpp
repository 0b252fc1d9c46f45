// kiln: reductions. kiln::sum<Axis>(x) reduces one axis (negative axes count from the end),
// kiln::sum<Axis, true>(x) keeps it with extent 1, kiln::sum(x) reduces everything to a scalar.
// mean = sum / count; max and min of an empty axis are -inf and +inf.
#pragma once
#include <limits>

#include "kiln/expr/node.hpp"

namespace kiln {

template <ReduceKind K, int Axis, bool Keep, bool All>
struct Reduce {
  static constexpr NodeKind kind = NodeKind::Reduce;
  static constexpr bool composite = false;
  static constexpr ReduceKind reduce_kind = K;
  static constexpr int axis = Axis;  // normalised: 0 <= axis < input rank (ignored when All)
  static constexpr bool keep = Keep;
  static constexpr bool all = All;
  static constexpr const char* name = K == ReduceKind::Sum    ? "sum"
                                      : K == ReduceKind::Mean ? "mean"
                                      : K == ReduceKind::Max  ? "max"
                                                              : "min";
  template <int R>
  static constexpr int out_rank = All ? 0 : (Keep ? R : R - 1);

  template <class T>
  KILN_HOST_DEVICE static constexpr T identity() {
    if constexpr (K == ReduceKind::Max) return -std::numeric_limits<T>::infinity();
    else if constexpr (K == ReduceKind::Min) return std::numeric_limits<T>::infinity();
    else return T(0);
  }
  // Reverse mode: the cotangent spreads back over the reduced elements; for max and min it is
  // shared evenly by the elements equal to the result (as torch.amax and torch.amin do).
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& x = std::get<0>(y.children);
    const auto back = [&](const auto& v) {  // y-shaped -> broadcastable to x
      if constexpr (All || Keep) return v;
      else return unsqueeze<Axis>(v);
    };
    const auto spread = expand_as(back(g), x);
    if constexpr (K == ReduceKind::Sum) {
      return std::tuple{spread};
    } else if constexpr (K == ReduceKind::Mean) {
      if constexpr (All) return std::tuple{spread / count(x)};
      else return std::tuple{spread / count<Axis>(x)};
    } else {
      const auto hit = (x >= back(y)) * (x <= back(y));
      if constexpr (All) return std::tuple{spread * hit / sum(hit)};
      else return std::tuple{spread * hit / sum<Axis, true>(hit)};
    }
  }

  // Forward mode: the same reduction of the tangent (max and min: its mean over the elements
  // equal to the result, matching the reverse rule).
  template <class N, class Tx>
  static constexpr auto jvp(const N& y, const Tx& t) {
    const auto& x = std::get<0>(y.children);
    const auto reduce = [](const auto& v) {
      if constexpr (All) return sum(v);
      else return sum<Axis, Keep>(v);
    };
    if constexpr (K == ReduceKind::Sum) {
      return reduce(t);
    } else if constexpr (K == ReduceKind::Mean) {
      if constexpr (All) return sum(t) / count(x);
      else return sum<Axis, Keep>(t) / count<Axis>(x);
    } else {
      const auto back = [&](const auto& v) {
        if constexpr (All || Keep) return v;
        else return unsqueeze<Axis>(v);
      };
      const auto hit = (x >= back(y)) * (x <= back(y));
      return reduce(t * hit) / reduce(hit);
    }
  }

  // The accumulated value -> the result, given the number of reduced elements.
  template <class T>
  KILN_HOST_DEVICE static T finish(T acc, index_t count) {
    if constexpr (K == ReduceKind::Mean) return acc / static_cast<T>(count);
    else return acc;
  }
};

namespace detail {
template <ReduceKind K, int Axis, bool Keep, Expression X>
constexpr auto make_axis_reduce(X x) {
  static_assert(X::rank >= 1, "kiln: reducing over an axis needs an operand of rank >= 1; use the all-axes form kiln::sum(x)");
  static_assert(Axis >= -X::rank && Axis < X::rank,
                "kiln: the reduction axis is out of range for the operand's rank (axes run from -rank to rank-1)");
  constexpr int a = axis_index<Axis, X::rank>;
  using Op = Reduce<K, a, Keep, false>;
  return Node<Op, X>(Op{}, x);
}
template <ReduceKind K, Expression X>
constexpr auto make_total_reduce(X x) {
  using Op = Reduce<K, 0, false, true>;
  return Node<Op, X>(Op{}, x);
}
}  // namespace detail

#define KILN_REDUCTION(fn, K)                                   \
  template <int Axis, bool Keep = false, Expression X>          \
  constexpr auto fn(X x) {                                      \
    return detail::make_axis_reduce<K, Axis, Keep>(x);          \
  }                                                             \
  template <Expression X>                                       \
  constexpr auto fn(X x) {                                      \
    return detail::make_total_reduce<K>(x);                     \
  }
KILN_REDUCTION(sum, ReduceKind::Sum)
KILN_REDUCTION(mean, ReduceKind::Mean)
KILN_REDUCTION(max, ReduceKind::Max)
KILN_REDUCTION(min, ReduceKind::Min)
#undef KILN_REDUCTION

}  // namespace kiln
