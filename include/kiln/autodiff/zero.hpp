// kiln: the zero cotangent. Reverse-mode rules return NoGrad for an operand that has no
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

}  // namespace kiln::autodiff
