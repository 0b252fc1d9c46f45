// kiln: layout ops. They are views: no kernel runs for them, the consumer reads the source
// through other strides. permute<P...> reorders the axes (axis d of the result is axis P[d] of
// the operand); transpose swaps two axes, the last two by default; reshape reinterprets a
// contiguous value with new extents (one of which may be -1, inferred from the element count).
#pragma once
#include <array>
#include <cstddef>
#include <utility>

#include "kiln/expr/node.hpp"

namespace kiln {

template <int... P>
struct Permute;
template <int... P, Expression X>
constexpr auto permute(X x);

namespace detail {
template <int... P>
constexpr bool is_permutation() {
  constexpr int r = sizeof...(P);
  bool seen[r > 0 ? r : 1] = {};
  for (int p : std::array<int, sizeof...(P)>{P...}) {
    if (p < 0 || p >= r || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}
template <int... P>
constexpr bool is_identity_permutation() {
  int d = 0;
  for (int p : std::array<int, sizeof...(P)>{P...})
    if (p != d++) return false;
  return true;
}
// The inverse of P: axis P[d] of the result of permute<inverse...> is axis d.
template <int... P>
constexpr std::array<int, sizeof...(P)> inverse_permutation() {
  std::array<int, sizeof...(P)> inv{};
  int d = 0;
  for (int p : std::array<int, sizeof...(P)>{P...}) inv[static_cast<std::size_t>(p)] = d++;
  return inv;
}
// permute<A[0], A[1], ...>(x) for a constexpr array A.
template <auto A, class X>
constexpr auto permute_by(const X& x) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) { return permute<A[I]...>(x); }(std::make_index_sequence<A.size()>{});
}
// The permutation swapping axes A and B of a rank-R value.
template <int R, int A, int B>
constexpr std::array<int, R> swap_permutation() {
  std::array<int, R> p{};
  for (int d = 0; d < R; ++d) p[d] = d == A ? B : d == B ? A : d;
  return p;
}
}  // namespace detail

template <int... P>
struct Permute {
  static constexpr NodeKind kind = NodeKind::Permute;
  static constexpr bool composite = false;
  static constexpr const char* name = "permute";
  static constexpr int perm[] = {P...};
  template <int R>
  static constexpr int out_rank = R;
  // The adjoint of a permutation is its inverse.
  template <class N, class G>
  static constexpr auto vjp(const N&, const G& g) {
    return std::tuple{detail::permute_by<detail::inverse_permutation<P...>()>(g)};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N&, const Tx& t) {
    return permute<P...>(t);
  }
};

// permute<P...>(x): axis d of the result is axis P[d] of x (torch.permute). The identity is x.
template <int... P, Expression X>
constexpr auto permute(X x) {
  static_assert(sizeof...(P) == X::rank, "kiln::permute: give one axis per axis of the operand (as many as its rank)");
  static_assert(detail::is_permutation<P...>(),
                "kiln::permute: the axes must be a permutation of 0 .. rank-1, each once (negative axes are not taken)");
  if constexpr (detail::is_identity_permutation<P...>()) return x;
  else return Node<Permute<P...>, X>(Permute<P...>{}, x);
}

// transpose<A, B>(x) swaps axes A and B (negative axes count from the end); transpose(x) swaps
// the last two.
template <int A, int B, Expression X>
constexpr auto transpose(X x) {
  static_assert(A >= -X::rank && A < X::rank && B >= -X::rank && B < X::rank,
                "kiln::transpose<A, B>: an axis is out of range for the operand's rank");
  constexpr int a = A < 0 ? A + X::rank : A, b = B < 0 ? B + X::rank : B;
  return detail::permute_by<detail::swap_permutation<X::rank, a, b>()>(x);
}
template <Expression X>
constexpr auto transpose(X x) {
  static_assert(X::rank >= 2, "kiln::transpose swaps the last two axes, so its operand needs rank >= 2");
  return transpose<-2, -1>(x);
}

template <int R>
struct Reshape {
  static constexpr NodeKind kind = NodeKind::Reshape;
  static constexpr bool composite = false;
  static constexpr const char* name = "reshape";
  template <int>
  static constexpr int out_rank = R;
  long dims[R > 0 ? R : 1];
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{reshape_as(g, std::get<0>(y.children))};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N& y, const Tx& t) {
    return reshape_as(t, y);
  }
};

// reshape(x, {a, b, c}); -1 stands for the extent that makes the element counts agree.
template <Expression X, std::size_t R>
constexpr auto reshape(X x, const long (&dims)[R]) {
  static_assert(R <= kMaxRank, "kiln::reshape: the new rank exceeds kiln::kMaxRank (6)");
  Reshape<static_cast<int>(R)> op{};
  for (std::size_t i = 0; i < R; ++i) op.dims[i] = dims[i];
  return Node<Reshape<static_cast<int>(R)>, X>(op, x);
}

}  // namespace kiln
