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
template <class... Es>
struct has_host<Outputs<Es...>> : std::bool_constant<(has_host<Es>::value || ...)> {};

}  // namespace kiln
