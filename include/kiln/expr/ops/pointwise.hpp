// kiln: pointwise ops. Each op is declared once, here: its name, arity and scalar formula
// (host and device). Shapes broadcast like numpy; scalars may stand on either side.
// Comparisons yield 1 or 0 in the operands' element type; where(c, a, b) picks a where c != 0.
// The ops exact on integers (below) also compute on kiln::i32 and kiln::i64 tensors.
#pragma once
#include <algorithm>
#include <limits>

#include "kiln/core/errors.hpp"
#include "kiln/core/math.hpp"
#include "kiln/expr/node.hpp"
#include "kiln/expr/ops/cast.hpp"
#include "kiln/expr/zero.hpp"

namespace kiln {

struct PointwiseOp {
  static constexpr NodeKind kind = NodeKind::Pointwise;
  static constexpr bool composite = false;
  template <int... R>
  static constexpr int out_rank = std::max({0, R...});
};

namespace detail {
template <class E>
using expr_t = std::remove_cvref_t<E>;

template <class Op, class... Cs>
constexpr auto make_pointwise(Cs... cs) {
  static_assert((std::is_same_v<typename Cs::dtype, typename std::tuple_element_t<0, std::tuple<Cs...>>::dtype> && ...),
                "kiln: the operands of a pointwise op have different element types (float and "
                "double); kiln converts nothing implicitly, so declare them with one type");
  return Node<Op, Cs...>(Op{}, cs...);
}
// A scalar operand becomes a Constant of the expression's element type.
template <class E, class S>
constexpr auto as_operand(S s) {
  if constexpr (Expression<S>) return s;
  else return Constant<typename E::dtype>(static_cast<compute_t<typename E::dtype>>(s));
}
}  // namespace detail

// KILN_UNARY(Struct, function, formula in x of type T, vjp in x, y = f(x), g = cotangent):
// the op's scalar formula and its reverse-mode rule, an expression, side by side (Adept's way).
// Bits: the significant bits the result is stored with; formulas pass it to kiln::math's
// functions that have cheaper forms for 16-bit results (core/math.hpp, "Precision policy").
#define KILN_UNARY(Struct, fn, formula, vjp_rule)                              \
  struct Struct : PointwiseOp {                                                \
    static constexpr const char* name = #fn;                                   \
    template <class T, int Bits = significand_bits<T>>                         \
    KILN_HOST_DEVICE KILN_INLINE static T apply(T x) {                         \
      return formula;                                                          \
    }                                                                          \
    template <class N, class G>                                                \
    static constexpr auto vjp(const N& y, const G& g) {                        \
      const auto& x = std::get<0>(y.children);                                 \
      (void)x;                                                                 \
      return std::tuple{vjp_rule};                                             \
    }                                                                          \
    /* Elementwise: the forward rule is the reverse rule applied to t. */     \
    template <class N, class Tx>                                               \
    static constexpr auto jvp(const N& y, const Tx& t) {                       \
      return std::get<0>(vjp(y, t));                                           \
    }                                                                          \
  };                                                                           \
  template <Expression X>                                                      \
  constexpr auto fn(X x) {                                                     \
    return detail::make_pointwise<Struct>(x);                                  \
  }

KILN_UNARY(Neg, neg, -x, -g)
KILN_UNARY(Exp, exp, math::exp<Bits>(x), g * y)
KILN_UNARY(Log, log, math::log(x), g / x)
KILN_UNARY(Sqrt, sqrt, math::sqrt(x), g / (y * 2))
KILN_UNARY(Rsqrt, rsqrt, T(1) / math::sqrt(x), g * y * y * y * -0.5)
// d|x| = sign(x); 0 at 0, as PyTorch.
KILN_UNARY(Abs, abs, x < T(0) ? -x : x, g * ((x > 0) - (x < 0)))
KILN_UNARY(Sin, sin, math::sin(x), g * cos(x))
KILN_UNARY(Cos, cos, math::cos(x), -g * sin(x))
KILN_UNARY(Tanh, tanh, math::tanh<Bits>(x), g * (1 - y * y))
// sigmoid x = 1 / (1 + e^{-x})
KILN_UNARY(Sigmoid, sigmoid, math::sigmoid<Bits>(x), g * y * (1 - y))
// relu x = max(x, 0); NaN stays NaN.
KILN_UNARY(Relu, relu, x < T(0) ? T(0) : x, g * (y > 0))  // from the output, as PyTorch: relu'(0) = 0, and x need not be kept
// gelu x = x Phi(x) = x/2 (1 + erf(x / sqrt 2)), the exact (erf) form; see math::normal_cdf.
// Phi and phi, the standard normal CDF and density: gelu's derivative is Phi(x) + x phi(x).
KILN_UNARY(NormalPdf, normal_pdf, T(0.39894228040143267794) * math::exp<Bits>(T(-0.5) * x * x), g * -x * y)
KILN_UNARY(NormalCdf, normal_cdf, math::normal_cdf(x), g * normal_pdf(x))
KILN_UNARY(Gelu, gelu, x * math::normal_cdf(x), g * (normal_cdf(x) + x * normal_pdf(x)))
// gelu_tanh x = x/2 (1 + tanh(u)), u = k (x + c x^3), k = sqrt(2/pi), c = 0.044715: the tanh
// approximation, computed as x sigmoid(2u) (equal: (1 + tanh u)/2 = sigmoid(2u)), which does not
// cancel where tanh u is near -1 (x below about -3; 1 + tanh u lost every digit there).
// d/dx = s + x s (1 - s) 2k (1 + 3c x^2), s = sigmoid(2u), 1 - s = sigmoid(-2u).
KILN_UNARY(GeluTanh, gelu_tanh, x * math::sigmoid<Bits>(T(1.5957691216057307) * (x + T(0.044715) * x * x * x)),
           g * (sigmoid((x + x * x * x * 0.044715) * 1.5957691216057307) +
                x * sigmoid((x + x * x * x * 0.044715) * 1.5957691216057307) *
                    sigmoid((x + x * x * x * 0.044715) * -1.5957691216057307) * ((x * x * 0.134145 + 1) * 1.5957691216057307)))
KILN_UNARY(Square, square, x * x, g * x * 2)
// silu x = x sigmoid(x) (swish with beta = 1). d/dx = s + x s (1 - s) = s (1 + x sigmoid(-x)),
// s = sigmoid(x); sigmoid(-x) rather than 1 - s, which cancels for large x.
KILN_UNARY(Silu, silu, x * math::sigmoid<Bits>(x), g * (sigmoid(x) * (x * sigmoid(-x) + 1)))
#undef KILN_UNARY

// KILN_BINARY(Struct, name, formula in a and b of type T, vjp in a, b, y = f(a, b), g): the
// rule's cotangents have the result's shape; unbroadcast() sums one down to its operand's shape.
#define KILN_BINARY(Struct, fn, formula, vjp_a, vjp_b, jvp_rule)               \
  struct Struct : PointwiseOp {                                                \
    static constexpr const char* name = #fn;                                   \
    template <class T, int Bits = significand_bits<T>>                         \
    KILN_HOST_DEVICE KILN_INLINE static T apply(T a, T b) {                    \
      return formula;                                                          \
    }                                                                          \
    template <class N, class G>                                                \
    static constexpr auto vjp(const N& y, const G& g) {                        \
      const auto& a = std::get<0>(y.children);                                 \
      const auto& b = std::get<1>(y.children);                                 \
      (void)a, (void)b;                                                        \
      return std::tuple{vjp_a, vjp_b};                                         \
    }                                                                          \
    template <class N, class Ta, class Tb>                                     \
    static constexpr auto jvp(const N& y, const Ta& ta, const Tb& tb) {        \
      const auto& a = std::get<0>(y.children);                                 \
      const auto& b = std::get<1>(y.children);                                 \
      (void)a, (void)b;                                                        \
      using namespace autodiff;                                                \
      return jvp_rule;                                                         \
    }                                                                          \
  };

#define KILN_NO_GRAD autodiff::NoGrad {}
KILN_BINARY(Add, add, a + b, unbroadcast(g, a), unbroadcast(g, b), add_cotangents(ta, tb))
KILN_BINARY(Sub, sub, a - b, unbroadcast(g, a), unbroadcast(-g, b), add_cotangents(ta, tangent_neg(tb)))
KILN_BINARY(Mul, mul, a * b, unbroadcast(g * b, a), unbroadcast(g * a, b), add_cotangents(tangent_mul(ta, b), tangent_mul(tb, a)))
KILN_BINARY(Div, div, a / b, unbroadcast(g / b, a), unbroadcast(-g * y / b, b),
            add_cotangents(tangent_mul(ta, 1 / b), tangent_mul(tb, -y / b)))
// maximum and minimum propagate NaN, as PyTorch does; a tie sends the gradient to a.
KILN_BINARY(Maximum, maximum, (a != a || a > b) ? a : b, unbroadcast(g * (a >= b), a), unbroadcast(g * (a < b), b),
            add_cotangents(tangent_mul(ta, a >= b), tangent_mul(tb, a < b)))
KILN_BINARY(Minimum, minimum, (a != a || a < b) ? a : b, unbroadcast(g * (a <= b), a), unbroadcast(g * (a > b), b),
            add_cotangents(tangent_mul(ta, a <= b), tangent_mul(tb, a > b)))
// The exponent is a scalar constant: d/da a^p = p a^(p-1).
KILN_BINARY(Pow, pow, math::pow(a, b), g * b.value * pow(a, b.value - 1), KILN_NO_GRAD, tangent_mul(ta, pow(a, b.value - 1) * b.value))
// Comparisons are piecewise constant: no gradient.
KILN_BINARY(Less, less, a < b ? T(1) : T(0), KILN_NO_GRAD, KILN_NO_GRAD, NoGrad{})
KILN_BINARY(Greater, greater, a > b ? T(1) : T(0), KILN_NO_GRAD, KILN_NO_GRAD, NoGrad{})
KILN_BINARY(LessEqual, less_equal, a <= b ? T(1) : T(0), KILN_NO_GRAD, KILN_NO_GRAD, NoGrad{})
KILN_BINARY(GreaterEqual, greater_equal, a >= b ? T(1) : T(0), KILN_NO_GRAD, KILN_NO_GRAD, NoGrad{})
KILN_BINARY(Equal, equal, a == b ? T(1) : T(0), KILN_NO_GRAD, KILN_NO_GRAD, NoGrad{})
KILN_BINARY(NotEqual, not_equal, a != b ? T(1) : T(0), KILN_NO_GRAD, KILN_NO_GRAD, NoGrad{})
#undef KILN_BINARY

// where(c, a, b) = a where c != 0, else b.
struct Where : PointwiseOp {
  static constexpr const char* name = "where";
  template <class T, int = significand_bits<T>>
  KILN_HOST_DEVICE KILN_INLINE static T apply(T c, T a, T b) {
    return c != T(0) ? a : b;
  }
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& [c, a, b] = y.children;
    return std::tuple{KILN_NO_GRAD, unbroadcast(where(c, g, 0), a), unbroadcast(where(c, 0, g), b)};
  }
  template <class N, class Tc, class Ta, class Tb>
  static constexpr auto jvp(const N& y, const Tc&, const Ta& ta, const Tb& tb) {
    const auto& c = std::get<0>(y.children);
    using autodiff::NoGrad;
    if constexpr (std::is_same_v<Ta, NoGrad>) return where(c, 0, tb);
    else if constexpr (std::is_same_v<Tb, NoGrad>) return where(c, ta, 0);
    else return where(c, ta, tb);
  }
};
#undef KILN_NO_GRAD

// Binary operators and functions: expression (op) expression, expression (op) scalar,
// scalar (op) expression.
#define KILN_BINARY_FN(Struct, fn)                                                        \
  template <class A, class B>                                                             \
    requires((Expression<A> && (Expression<B> || Scalar<B>)) || (Scalar<A> && Expression<B>)) \
  constexpr auto fn(A a, B b) {                                                           \
    using E = std::conditional_t<Expression<A>, A, B>;                                   \
    return detail::make_pointwise<Struct>(detail::as_operand<E>(a), detail::as_operand<E>(b)); \
  }
KILN_BINARY_FN(Add, operator+)
KILN_BINARY_FN(Sub, operator-)
KILN_BINARY_FN(Mul, operator*)
KILN_BINARY_FN(Div, operator/)
KILN_BINARY_FN(Less, operator<)
KILN_BINARY_FN(Greater, operator>)
KILN_BINARY_FN(LessEqual, operator<=)
KILN_BINARY_FN(GreaterEqual, operator>=)
KILN_BINARY_FN(Maximum, maximum)
KILN_BINARY_FN(Minimum, minimum)
KILN_BINARY_FN(Equal, equal)
KILN_BINARY_FN(NotEqual, not_equal)
#undef KILN_BINARY_FN

// The ops exact on integers, which also compute on kiln::i32 and kiln::i64 operands (their
// result of that type; comparisons give 1 or 0). Division and the transcendental functions
// are not among them: kiln::cast<float>(x) first.
namespace detail {
template <>
inline constexpr bool integer_op<Neg> = true;
template <>
inline constexpr bool integer_op<Abs> = true;
template <>
inline constexpr bool integer_op<Add> = true;
template <>
inline constexpr bool integer_op<Sub> = true;
template <>
inline constexpr bool integer_op<Mul> = true;
template <>
inline constexpr bool integer_op<Maximum> = true;
template <>
inline constexpr bool integer_op<Minimum> = true;
template <>
inline constexpr bool integer_op<Less> = true;
template <>
inline constexpr bool integer_op<Greater> = true;
template <>
inline constexpr bool integer_op<LessEqual> = true;
template <>
inline constexpr bool integer_op<GreaterEqual> = true;
template <>
inline constexpr bool integer_op<Equal> = true;
template <>
inline constexpr bool integer_op<NotEqual> = true;
template <>
inline constexpr bool integer_op<Where> = true;
}  // namespace detail

template <Expression X>
constexpr auto operator-(X x) {
  return neg(x);
}

// pow(x, p) with a scalar exponent.
template <Expression X, Scalar S>
constexpr auto pow(X x, S p) {
  return detail::make_pointwise<Pow>(x, detail::as_operand<X>(p));
}

// An integer condition selecting float values is cast to their type first (one more kernel).
template <Expression C, class A, class B>
  requires((Expression<A> || Scalar<A>) && (Expression<B> || Scalar<B>) && (Expression<A> || Expression<B>))
constexpr auto where(C c, A a, B b) {
  using E = std::conditional_t<Expression<A>, A, B>;
  if constexpr (is_index_element_v<typename C::dtype> && !is_index_element_v<typename E::dtype>)
    return detail::make_pointwise<Where>(cast<typename E::dtype>(c), detail::as_operand<E>(a), detail::as_operand<E>(b));
  else return detail::make_pointwise<Where>(c, detail::as_operand<E>(a), detail::as_operand<E>(b));
}

// swiglu(gate, up) = silu(gate) up, the gated linear unit of Llama's MLP; gate and up
// broadcast. A composition: one fused pointwise kernel, derivatives from silu's and mul's.
template <Expression G, Expression U>
constexpr auto swiglu(G gate, U up) {
  return silu(gate) * up;
}

// softcap(x, c) = c tanh(x / c), Gemma 2's soft capping of logits to (-c, c), about x where
// |x| is much less than c. A composition: one fused pointwise kernel; its derivative,
// 1 - tanh^2(x / c), comes from tanh's rule. c must be positive and finite: a constant
// expression with another c does not compile, a run-time one throws ValueError.
template <Expression X>
constexpr auto softcap(X x, double c) {
  if (!(c > 0 && c < std::numeric_limits<double>::infinity()))
    throw ValueError("kiln::softcap: the cap c must be positive and finite");
  return tanh(x / c) * c;
}

}  // namespace kiln
