// kiln: host(fn, x), a graph break. fn is called on the host with the materialised value of x,
// as fn(const kiln::Tensor<T>&) -> kiln::Tensor<T> of the same rank, and its result flows on.
// The program splits there into compiled segments (runtime/segments.hpp); under
// kiln::FullGraph it is a compile error.
#pragma once
#include <type_traits>
#include <utility>

#include "kiln/expr/node.hpp"

namespace kiln {

template <class F>
struct HostOp {
  static constexpr NodeKind kind = NodeKind::Pointwise;  // never planned: compile() splits first
  static constexpr bool composite = false;
  static constexpr bool host = true;
  static constexpr const char* name = "host";
  template <int R>
  static constexpr int out_rank = R;
  F fn;
};

template <class F, Expression X>
constexpr auto host(F fn, X x) {
  using T = typename X::dtype;
  static_assert(std::is_invocable_r_v<Tensor<T>, F&, const Tensor<T>&>,
                "kiln::host: the function must be callable as kiln::Tensor<T>(const kiln::Tensor<T>&) with the "
                "operand's element type T");
  return Node<HostOp<F>, X>(HostOp<F>{std::move(fn)}, x);
}

// Whether an expression contains a host node.
template <class E>
struct has_host : std::false_type {};
template <class Op, class... Cs>
struct has_host<Node<Op, Cs...>> : std::bool_constant<(has_host<Cs>::value || ...)> {};
template <class F, class C>
struct has_host<Node<HostOp<F>, C>> : std::true_type {};
template <std::uint64_t Tag, class E>
struct has_host<Shared<Tag, E>> : has_host<E> {};
template <class... Es>
struct has_host<Outputs<Es...>> : std::bool_constant<(has_host<Es>::value || ...)> {};

// kiln::shared<"name">(e): e computed once wherever it occurs in one compiled program, even
// when it holds constants. Use it for a value built once and used in several places, e.g. an
// optimizer's new moment that is both assigned and read by the weight update:
//   const auto m1 = kiln::shared<"m1">(m * 0.9 + g * 0.1);
// Two different values must not share a name within one program (compile() checks this).
template <fixed_string S, Expression E>
constexpr auto shared(const E& e) {
  static_assert(!has_host<E>::value, "kiln::shared: the value must not contain a kiln::host graph break");
  return share<fnv1a(S.view())>(e);
}

}  // namespace kiln
