// kiln: online softmax (Milakov and Gimelshein, "Online normalizer calculation for softmax",
// 2018) as a row kernel's stage pair. Softmax and log_softmax lower to a max stage m = max_j x_j
// followed by a sum stage d = sum_j e^(x_j - m) over the same values x (up to SlotAlias: the
// lowering gives the two iteration spaces their own load slots). A backend that streams the
// row from memory can compute both in one pass, keeping (m, d) and rescaling d whenever m
// grows:
//   m' = max(m, x),  d' = d e^(m - m') + e^(x - m'),
// and combining two partial pairs the same way: (m1, d1) + (m2, d2) = (M, d1 e^(m1 - M) +
// d2 e^(m2 - M)) with M = max(m1, m2). One read of the row instead of two. d differs from the
// two-pass sum by rounding only (a few ulp for any row length); NaN propagates as in max.
#pragma once
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/expr/ops/pointwise.hpp"
#include "kiln/lower/evaluator.hpp"

namespace kiln::lower {

template <class Tree>
struct uncached {
  using type = Tree;
};
template <int S, class F>
struct uncached<LCached<S, F>> {
  using type = F;
};

// Stages S0 (number I) and S1: max of X, then the sum of e^(Y - stage I), with Y the values X
// (or a row cache of them) once every load slot reads its first alias.
template <class S0, class S1, int I, class Alias>
struct is_online_pair : std::false_type {};
template <class X, bool C0, class Y, bool C1, int I, class Alias>
struct is_online_pair<Stage<ReduceKind::Max, X, C0>, Stage<ReduceKind::Sum, LOp<Exp, LOp<Sub, Y, LStage<I>>>, C1>, I, Alias>
    : std::bool_constant<std::is_same_v<typename remap_slots<X, Alias>::type,
                                        typename remap_slots<typename uncached<Y>::type, Alias>::type>> {};

// The number of the first stage of the first such pair in Stages, or -1.
template <class Stages, class Alias>
struct online_first;
template <class... Ss, class Alias>
struct online_first<TypeList<Ss...>, Alias> {
  static constexpr int value = [] {
    constexpr int n = sizeof...(Ss);
    if constexpr (n < 2) {
      return -1;
    } else {
      using L = std::tuple<Ss...>;
      int first = -1;
      [&]<int... I>(std::integer_sequence<int, I...>) {
        ((first < 0 && is_online_pair<std::tuple_element_t<I, L>, std::tuple_element_t<I + 1, L>, I, Alias>::value
              ? first = I
              : 0),
         ...);
      }(std::make_integer_sequence<int, n - 1>{});
      return first;
    }
  }();
};

}  // namespace kiln::lower
