// kiln: reverse mode. kiln::grad(loss, w1, w2, ...) returns the gradient expressions
// d loss / d wi as a std::tuple, built at compile time from each op's vjp rule (declared next to
// the op). They are ordinary expressions: compile them alone or together with the loss, e.g.
//   auto [dw, db] = kiln::grad(loss, w, b);
//   auto step = kiln::compile(kiln::outputs(loss, dw, db));
// and the planner fuses the forward and backward kernels of the joint graph as one program.
//
// The walk follows the expression tree from the loss down, pruning subtrees that contain none
// of the variables, and sums the contributions that reach each variable. A value used k times
// is walked k times with its k cotangents; the stateless parts of those walks are merged again
// by the graph's common-subexpression elimination.
#pragma once
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/autodiff/zero.hpp"
#include "kiln/expr/ops/broadcast.hpp"
#include "kiln/expr/ops/host.hpp"

namespace kiln {

namespace autodiff {

// Whether an expression contains a symbol with one of the ids.
template <class E, std::uint64_t... Ids>
struct depends_on : std::false_type {};
template <std::uint64_t Id, int R, class T, SymbolKind K, class N, std::uint64_t... Ids>
struct depends_on<Symbol<Id, R, T, K, N>, Ids...> : std::bool_constant<((Id == Ids) || ...)> {};
template <class Op, class... Cs, std::uint64_t... Ids>
struct depends_on<Node<Op, Cs...>, Ids...> : std::bool_constant<(depends_on<Cs, Ids...>::value || ...)> {};

template <bool Take, class G>
constexpr auto take_if(const G& g) {
  if constexpr (Take) return g;
  else return NoGrad{};
}

template <class... A, class... B, std::size_t... I>
constexpr auto add_all(const std::tuple<A...>& a, const std::tuple<B...>& b, std::index_sequence<I...>) {
  return std::tuple{add_cotangents(std::get<I>(a), std::get<I>(b))...};
}

template <std::uint64_t... Ids>
struct Backprop {
  static constexpr auto none() { return std::tuple{take_if<(Ids != Ids)>(0)...}; }

  // The contributions of expression e, whose cotangent is g, to each variable.
  template <class E, class G>
  static constexpr auto run(const E& e, const G& g) {
    if constexpr (std::is_same_v<G, NoGrad> || !depends_on<E, Ids...>::value) {
      return none();
    } else if constexpr (E::kind == NodeKind::Symbol) {
      return std::tuple{take_if<E::id == Ids>(g)...};
    } else {
      using Op = typename E::op_type;
      static_assert(!requires { Op::host; },
                    "kiln::grad: kiln::host (a graph break) has no derivative; keep it out of the differentiated path");
      return children<0>(e, Op::vjp(e, g), none());
    }
  }

  // Adds the contributions of children I, I+1, ... to acc.
  template <std::size_t I, class E, class Cts, class Acc>
  static constexpr auto children(const E& e, const Cts& cts, const Acc& acc) {
    if constexpr (I == std::tuple_size_v<decltype(e.children)>) {
      return acc;
    } else {
      const auto sum = add_all(acc, run(std::get<I>(e.children), std::get<I>(cts)), std::index_sequence_for<decltype(Ids)...>{});
      return children<I + 1>(e, cts, sum);
    }
  }
};

}  // namespace autodiff

// The gradients of a scalar loss with respect to symbols, as a std::tuple of expressions, one
// per symbol, each of that symbol's shape. A symbol the loss does not depend on gets zeros.
template <Expression L, Expression... Ws>
constexpr auto grad(const L& loss, const Ws&... ws) {
  static_assert(L::rank == 0,
                "kiln::grad: the loss must be a scalar (rank 0); reduce it first, e.g. with kiln::sum or kiln::mean");
  static_assert(sizeof...(Ws) > 0, "kiln::grad: name the symbols to differentiate with respect to");
  static_assert(((Ws::kind == NodeKind::Symbol) && ...),
                "kiln::grad: differentiate with respect to symbols (kiln::param or kiln::input), not expressions");
  static_assert((std::is_same_v<typename Ws::dtype, typename L::dtype> && ...),
                "kiln::grad: a variable's element type differs from the loss's");
  using T = typename L::dtype;
  const auto contributions = autodiff::Backprop<Ws::id...>::run(loss, Constant<T>(T(1)));
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    const auto finish = [](const auto& c, const auto& w) {
      // Every rule hands a variable a cotangent of its shape; none reached it: zeros.
      if constexpr (std::is_same_v<std::remove_cvref_t<decltype(c)>, autodiff::NoGrad>) return expand_as(Constant<T>(T(0)), w);
      else return c;
    };
    return std::tuple{finish(std::get<I>(contributions), ws)...};
  }(std::index_sequence_for<Ws...>{});
}

}  // namespace kiln
