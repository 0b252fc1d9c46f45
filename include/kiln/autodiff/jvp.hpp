// kiln: forward mode. kiln::jvp(y, kiln::tangent(x, dx), ...) returns the tangent of y (its
// directional derivative along dx, ...), an expression of y's shape built at compile time from
// each op's jvp rule. The tangents dx are symbols bound at call time like any input. Nesting
// works: kiln::jvp(kiln::grad(...)) is a Hessian-vector product.
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
  return {x, dx};
}

namespace autodiff {

template <class... Ts>
struct Forward {
  // The tangent of e: NoGrad where e depends on no variable.
  template <class E>
  static constexpr auto run(const E& e, const Ts&... ts) {
    if constexpr (!depends_on<E, Ts::x_type::id...>::value) {
      return NoGrad{};
    } else if constexpr (E::kind == NodeKind::Symbol) {
      return pick<E>(ts...);
    } else {
      using Op = typename E::op_type;
      static_assert(!requires { Op::host; }, "kiln::jvp: kiln::host (a graph break) has no derivative");
      return std::apply([&](const auto&... c) {
        return finish<E>(e, run(c, ts...)...);
      }, e.children);
    }
  }
  template <class E, class... Tc>
  static constexpr auto finish(const E& e, const Tc&... tc) {
    using Op = typename E::op_type;
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
  template <class S, class T0, class... Rest>
  static constexpr auto pick(const T0& t0, const Rest&... rest) {
    if constexpr (S::id == T0::x_type::id) return t0.dx;
    else return pick<S>(rest...);
  }
};

}  // namespace autodiff

template <Expression Y, class... X, class... Dx>
constexpr auto jvp(const Y& y, const Tangent<X, Dx>&... ts) {
  static_assert(sizeof...(X) > 0, "kiln::jvp: give at least one kiln::tangent(x, dx)");
  using T = typename Y::dtype;
  const auto t = autodiff::Forward<Tangent<X, Dx>...>::run(y, ts...);
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(t)>, autodiff::NoGrad>) return expand_as(Constant<T>(T(0)), y);
  else return expand_as(t, y);
}

}  // namespace kiln
