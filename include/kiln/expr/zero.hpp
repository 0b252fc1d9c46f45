// kiln: the zero cotangent, part of the vocabulary every op's derivative rules (next to the op,
// in expr/ops) are written in. Reverse-mode rules return NoGrad for an operand that has no
// derivative (a comparison's operands, where's condition, a shape-only operand) or that leads
// to no variable being differentiated; it never becomes a node.
#pragma once
#include <tuple>
#include <type_traits>

namespace kiln::autodiff {

struct NoGrad {};

template <class A, class B>
constexpr auto add_cotangents(const A& a, const B& b) {
  if constexpr (std::is_same_v<A, NoGrad>) return b;
  else if constexpr (std::is_same_v<B, NoGrad>) return a;
  else return a + b;
}

// Tangent arithmetic that skips zeros: t * e, t / e, -t, and sums.
template <class A, class B>
constexpr auto tangent_mul(const A& t, const B& e) {
  if constexpr (std::is_same_v<A, NoGrad>) return NoGrad{};
  else return t * e;
}
template <class A>
constexpr auto tangent_neg(const A& t) {
  if constexpr (std::is_same_v<A, NoGrad>) return NoGrad{};
  else return -t;
}
template <class F, class A>
constexpr auto tangent_apply(F&& f, const A& t) {  // a linear map of one tangent
  if constexpr (std::is_same_v<A, NoGrad>) return NoGrad{};
  else return f(t);
}

}  // namespace kiln::autodiff
