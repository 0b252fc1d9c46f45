// kiln: forward mode. kiln::jvp(y, kiln::tangent(x, dx), ...) returns the tangent of y (its
// directional derivative along dx, ...), an expression of y's shape built at compile time from
// each op's jvp rule. The tangents dx are symbols bound at call time like any input. Nesting
// works: kiln::jvp(kiln::grad(...)) is a Hessian-vector product.
//
// The walk visits the nodes that depend on the variables (autodiff/dag.hpp) operands first; each
// node's tangent is computed once, from its operands' tangents, and made a Shared value.
#pragma once
#include <type_traits>

#include "kiln/autodiff/grad.hpp"

namespace kiln {

// A variable and its tangent: both symbols of one rank and element type.
template <class X, class Dx>
struct Tangent {
  using x_type = X;
  X x;
  Dx dx;
};
template <Expression X, Expression Dx>
constexpr Tangent<X, Dx> tangent(X x, Dx dx) {
  static_assert(X::kind == NodeKind::Symbol && Dx::kind == NodeKind::Symbol,
                "kiln::tangent: pair a symbol with the symbol that carries its tangent, e.g. "
                "kiln::tangent(x, kiln::input<\"dx\", 2>())");
  static_assert(X::rank == Dx::rank && std::is_same_v<typename X::dtype, typename Dx::dtype>,
                "kiln::tangent: the tangent must have the variable's rank and element type");
  static_assert(!is_index_element_v<typename X::dtype>, "kiln::tangent: an integer input (kiln::i32, kiln::i64) has no tangent");
  return {x, dx};
}

namespace autodiff {

template <class D, std::uint64_t Tag, class... Ts>
struct Forward {
  static constexpr int N = D::size;

  template <class S, class T0, class... Rest>
  static constexpr const auto& pick(const T0& t0, const Rest&... rest) {
    if constexpr (S::id == T0::x_type::id) return t0.dx;
    else return pick<S>(rest...);
  }

  // The tangent of a node from its operands' tangents (NoGrad for an operand that depends on
  // no variable).
  template <class E, class... Tc>
  static constexpr auto apply(const E& e, const Tc&... tc) {
    using Op = typename E::op_type;
    static_assert(!requires { Op::host; }, "kiln::jvp: kiln::host (a graph break) has no derivative");
    if constexpr ((std::is_same_v<Tc, NoGrad> && ...)) {
      return NoGrad{};  // only shape operands depend on the variables
    } else {
      const auto t = Op::jvp(e, tc...);
      // Tangents of broadcasting ops take the result's shape, so reductions downstream see
      // the right axes.
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, NoGrad>) return NoGrad{};
      else if constexpr (sizeof...(Tc) > 1 && Op::kind == NodeKind::Pointwise) return expand_as(t, e);
      else return t;
    }
  }

  template <int I, class Root, class Prev>
  static constexpr auto tangent_of(const Root& root, const Prev& prev, const Ts&... ts) {
    using Entry = typename D::template entry<I>;
    using E = typename Entry::type;
    if constexpr (E::kind == NodeKind::Symbol) {
      return pick<E>(ts...);
    } else if constexpr (E::kind == NodeKind::Shared) {
      return std::get<Entry::kids[0]>(prev);
    } else {
      const auto& e = at_path(root, typename Entry::path{});
      const auto t = [&]<std::size_t... K>(std::index_sequence<K...>) {
        const auto operand = [&]<int Id>(std::integral_constant<int, Id>) {
          if constexpr (Id < 0) return NoGrad{};
          else return std::get<Id>(prev);
        };
        return apply(e, operand(std::integral_constant<int, Entry::kids[K]>{})...);
      }(std::make_index_sequence<Entry::nkids>{});
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, NoGrad>) return NoGrad{};
      else return share<hash_mix(Tag, static_cast<std::uint64_t>(I))>(t);
    }
  }

  // The tangents of entries I ... N-1, given those of 0 ... I-1; all N as a tuple.
  template <int I, class Root, class... Cs>
  static constexpr auto run(const Root& root, const std::tuple<Cs...>& prev, const Ts&... ts) {
    if constexpr (I == N) {
      return prev;
    } else {
      const auto t = tangent_of<I>(root, prev, ts...);
      return run<I + 1>(root, std::tuple_cat(prev, std::tuple{t}), ts...);
    }
  }
};

}  // namespace autodiff

template <std::uint64_t Salt = 0, Expression Y, class... X, class... Dx>
constexpr auto jvp(const Y& y, const Tangent<X, Dx>&... ts) {
  static_assert(sizeof...(X) > 0, "kiln::jvp: give at least one kiln::tangent(x, dx)");
  using T = typename Y::dtype;
  using D = autodiff::dag_of<autodiff::Vars<X::id...>, Y>;
  constexpr std::uint64_t tag = [] {
    std::uint64_t h = autodiff::dag_hash<D>(hash_mix(fnv1a("kiln::jvp"), Salt));
    ((h = hash_mix(hash_mix(h, X::id), Dx::id)), ...);
    return h;
  }();
  if constexpr (D::size == 0) {
    return expand_as(Constant<T>(0), y);
  } else {
    const auto all = autodiff::Forward<D, tag, Tangent<X, Dx>...>::template run<0>(y, std::tuple<>{}, ts...);
    const auto& t = std::get<D::size - 1>(all);  // the root is the last entry
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, autodiff::NoGrad>) return expand_as(Constant<T>(0), y);
    else return expand_as(t, y);
  }
}

}  // namespace kiln
