// kiln: cast<To>(x), x's values converted to element type To (any of float, double, kiln::bf16,
// kiln::f16, kiln::i32, kiln::i64): one kernel of the convert kind, as torch's x.to(dtype).
// Float to float rounds to nearest even; float to integer truncates toward zero, NaN giving 0
// and values past the integer's range its limits; integer to float rounds to nearest; i64 to
// i32 keeps the low 32 bits (core/dtype.hpp, kiln::convert). cast<T>(x) of an x of type T is x.
// The derivative of a cast between float types is the cast back; a cast from or to an integer
// type has none.
#pragma once
#include <tuple>
#include <type_traits>

#include "kiln/expr/node.hpp"
#include "kiln/expr/zero.hpp"

namespace kiln {

template <class To, Expression X>
constexpr auto cast(X x);

template <class To>
struct CastOp {
  static constexpr NodeKind kind = NodeKind::Convert;
  static constexpr bool composite = false;
  static constexpr bool takes_indices = true;  // integers in, as well as out
  static constexpr const char* name = "cast";
  template <int R>
  static constexpr int out_rank = R;
  template <class From>
  using dtype = To;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    using From = typename std::tuple_element_t<0, decltype(y.children)>::dtype;
    if constexpr (is_float_element_v<From> && is_float_element_v<To>) return std::tuple{cast<From>(g)};
    else return std::tuple{autodiff::NoGrad{}};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N& y, const Tx& t) {
    using From = typename std::tuple_element_t<0, decltype(y.children)>::dtype;
    if constexpr (is_float_element_v<From> && is_float_element_v<To>)
      return autodiff::tangent_apply([](const auto& v) { return cast<To>(v); }, t);
    else return autodiff::NoGrad{};
  }
};

template <class To, Expression X>
constexpr auto cast(X x) {
  static_assert(is_element_type_v<To>, "kiln::cast<To>: To must be float, double, kiln::bf16, kiln::f16, kiln::i32 or kiln::i64");
  if constexpr (std::is_same_v<To, typename X::dtype>) return x;
  else return Node<CastOp<To>, X>(CastOp<To>{}, x);
}

}  // namespace kiln
