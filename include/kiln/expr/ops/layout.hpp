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
  return detail::permute_by<detail::swap_permutation<X::rank, detail::axis_index<A, X::rank>, detail::axis_index<B, X::rank>>()>(x);
}
template <Expression X>
constexpr auto transpose(X x) {
  static_assert(X::rank >= 2, "kiln::transpose swaps the last two axes, so its operand needs rank >= 2");
  return transpose<-2, -1>(x);
}

// Axes [First, Last] of the operand replaced by N extents, dims (at most one -1, inferred from
// the element count): a view of a contiguous value. reshape replaces every axis, unflatten one,
// flatten a range by one.
template <int N, int First, int Last>
struct Reshape {
  static constexpr NodeKind kind = NodeKind::Reshape;
  static constexpr bool composite = false;
  static constexpr const char* name = "reshape";
  static constexpr int ndims = N;
  static constexpr int first_axis = First, last_axis = Last;
  template <int Rin>
  static constexpr int out_rank = Rin - (Last - First + 1) + N;
  long dims[N > 0 ? N : 1];
  template <class N_, class G>
  static constexpr auto vjp(const N_& y, const G& g) {
    return std::tuple{reshape_as(g, std::get<0>(y.children))};
  }
  template <class N_, class Tx>
  static constexpr auto jvp(const N_& y, const Tx& t) {
    return reshape_as(t, y);
  }
};

namespace detail {
template <int First, int Last, Expression X, std::size_t N>
constexpr auto reshape_axes(X x, const long (&dims)[N]) {
  using Op = Reshape<static_cast<int>(N), First, Last>;
  static_assert(Op::template out_rank<X::rank> <= kMaxRank, "kiln::reshape: the new rank exceeds kiln::kMaxRank (6)");
  Op op{};
  for (std::size_t i = 0; i < N; ++i) op.dims[i] = dims[i];
  return Node<Op, X>(op, x);
}
template <int A, int Rank>
constexpr int layout_axis() {
  static_assert(A >= -Rank && A < Rank, "kiln::flatten / kiln::unflatten: an axis is out of range for the operand's rank");
  return axis_index<A, Rank>;
}
}  // namespace detail

// reshape(x, {a, b, c}): x's elements with extents a, b, c; -1 stands for the extent that makes
// the element counts agree. The extents may be run-time values (an expression that is not
// constexpr); each call checks them against the operand's shape.
template <Expression X, std::size_t R>
constexpr auto reshape(X x, const long (&dims)[R]) {
  return detail::reshape_axes<0, X::rank - 1>(x, dims);
}

// unflatten<A>(x, {h, -1}): axis A split into the given extents (torch.unflatten), the other
// axes kept: [B, S, H * D] -> [B, S, H, D] with unflatten<-1>(x, {heads, -1}).
template <int A, Expression X, std::size_t R>
constexpr auto unflatten(X x, const long (&dims)[R]) {
  constexpr int a = detail::layout_axis<A, X::rank>();
  return detail::reshape_axes<a, a>(x, dims);
}

// flatten<A, B>(x): axes A to B (inclusive) merged into one (torch.flatten(x, A, B));
// flatten(x) merges all of them.
template <int A, int B, Expression X>
constexpr auto flatten(X x) {
  constexpr int a = detail::layout_axis<A, X::rank>(), b = detail::layout_axis<B, X::rank>();
  static_assert(a <= b, "kiln::flatten<A, B>: axis A must not come after axis B");
  return detail::reshape_axes<a, b>(x, {-1});
}
template <Expression X>
constexpr auto flatten(X x) {
  if constexpr (X::rank == 1) return x;
  else return flatten<0, -1>(x);
}

}  // namespace kiln
