// kiln: ops that take a shape from another value; reverse-mode derivatives are written with
// them, and users may use them too. The "like" operand is read for its shape only: it is
// never loaded and never forces a buffer.
//   expand_as(x, like)  x broadcast to like's shape          (pointwise)
//   sum_to(x, like)     x summed down to like's shape        (the adjoint of broadcasting)
//   reshape_as(x, like) x's elements with like's shape       (a view of a contiguous value)
//   unsqueeze<A>(x)     x with an axis of extent 1 before A  (a view)
//   count<A>(x), count(x)  the extent of axis A / the number of elements, as a scalar
//   column_index(like)  j at every element (i..., j) of like's shape (kiln::nn::one_hot uses it)
#pragma once
#include "kiln/expr/ops/pointwise.hpp"

namespace kiln {

struct ExpandAs : PointwiseOp {
  static constexpr const char* name = "expand_as";
  static constexpr unsigned shape_only = 0b10;
  template <class T, int = significand_bits<T>>
  KILN_HOST_DEVICE KILN_INLINE static T apply(T x) {
    return x;
  }
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{sum_to(g, std::get<0>(y.children)), autodiff::NoGrad{}};
  }
  template <class N, class Tx, class Tl>
  static constexpr auto jvp(const N& y, const Tx& t, const Tl&) {
    return autodiff::tangent_apply([&](const auto& v) { return expand_as(v, std::get<1>(y.children)); }, t);
  }
};

// The index along the last axis. It is always a kernel of its own (the planner never fuses it),
// so j is the element's column whatever the consumers' shapes are; that kernel's rows are not
// collapsed into one flat loop.
struct ColumnIndex : PointwiseOp {
  static constexpr const char* name = "column_index";
  static constexpr unsigned shape_only = 0b1;
  static constexpr bool column_index = true;
  template <class N, class G>
  static constexpr auto vjp(const N&, const G&) {
    return std::tuple{autodiff::NoGrad{}};
  }
  template <class N, class Tl>
  static constexpr auto jvp(const N&, const Tl&) {
    return autodiff::NoGrad{};
  }
};

struct SumTo {
  static constexpr NodeKind kind = NodeKind::ReduceTo;
  static constexpr bool composite = false;
  static constexpr const char* name = "sum_to";
  static constexpr unsigned shape_only = 0b10;
  template <int Ra, int Rb>
  static constexpr int out_rank = Rb;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{expand_as(g, std::get<0>(y.children)), autodiff::NoGrad{}};
  }
  template <class N, class Tx, class Tl>
  static constexpr auto jvp(const N& y, const Tx& t, const Tl&) {
    return autodiff::tangent_apply([&](const auto& v) { return sum_to(v, std::get<1>(y.children)); }, t);
  }
};

struct ReshapeAs {
  static constexpr NodeKind kind = NodeKind::ReshapeLike;
  static constexpr bool composite = false;
  static constexpr const char* name = "reshape_as";
  static constexpr unsigned shape_only = 0b10;
  template <int Ra, int Rb>
  static constexpr int out_rank = Rb;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{reshape_as(g, std::get<0>(y.children)), autodiff::NoGrad{}};
  }
  template <class N, class Tx, class Tl>
  static constexpr auto jvp(const N& y, const Tx& t, const Tl&) {
    return autodiff::tangent_apply([&](const auto& v) { return reshape_as(v, std::get<1>(y.children)); }, t);
  }
};

template <int Axis>
struct Unsqueeze {
  static constexpr NodeKind kind = NodeKind::Unsqueeze;
  static constexpr bool composite = false;
  static constexpr const char* name = "unsqueeze";
  static constexpr int axis = Axis;  // in the result
  template <int R>
  static constexpr int out_rank = R + 1;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{reshape_as(g, std::get<0>(y.children))};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N&, const Tx& t) {
    return unsqueeze<Axis>(t);
  }
};

template <int Axis, bool All>
struct Count {
  static constexpr NodeKind kind = NodeKind::Constant;
  static constexpr bool composite = false;
  static constexpr const char* name = "count";
  static constexpr unsigned shape_only = 0b1;
  static constexpr int axis = Axis;
  static constexpr bool all = All;
  template <int R>
  static constexpr int out_rank = 0;
  template <class N, class G>
  static constexpr auto vjp(const N&, const G&) {
    return std::tuple{autodiff::NoGrad{}};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N&, const Tx&) {
    return autodiff::NoGrad{};
  }
};

namespace detail {
template <class A, class B>
constexpr void same_dtype() {
  static_assert(std::is_same_v<typename A::dtype, typename B::dtype>,
                "kiln: the operands have different element types; declare them with one type");
}
}  // namespace detail

template <Expression X, Expression L>
constexpr auto expand_as(X x, L like) {
  detail::same_dtype<X, L>();
  static_assert(X::rank <= L::rank, "kiln::expand_as: the operand has a higher rank than the target shape");
  return Node<ExpandAs, X, L>(ExpandAs{}, x, like);
}
template <Expression L>
constexpr auto column_index(L like) {
  static_assert(L::rank >= 1, "kiln::column_index: the shape must have at least one axis");
  return Node<ColumnIndex, L>(ColumnIndex{}, like);
}
template <Expression X, Expression L>
constexpr auto sum_to(X x, L like) {
  detail::same_dtype<X, L>();
  static_assert(L::rank <= X::rank, "kiln::sum_to: the target shape has a higher rank than the operand");
  return Node<SumTo, X, L>(SumTo{}, x, like);
}
template <Expression X, Expression L>
constexpr auto reshape_as(X x, L like) {
  detail::same_dtype<X, L>();
  return Node<ReshapeAs, X, L>(ReshapeAs{}, x, like);
}
template <int Axis, Expression X>
constexpr auto unsqueeze(X x) {
  static_assert(Axis >= 0 && Axis <= X::rank, "kiln::unsqueeze: the new axis must lie in [0, rank]");
  static_assert(X::rank < kMaxRank, "kiln::unsqueeze: the result would exceed kiln::kMaxRank");
  return Node<Unsqueeze<Axis>, X>(Unsqueeze<Axis>{}, x);
}
// The adjoint of broadcasting an operand: the cotangent summed down to the operand's shape.
// A constant gets none.
template <class G, class A>
constexpr auto unbroadcast(const G& g, const A& a) {
  if constexpr (A::kind == NodeKind::Constant) return autodiff::NoGrad{};
  else return sum_to(g, a);
}

template <int Axis, Expression X>
constexpr auto count(X x) {
  static_assert(Axis >= -X::rank && Axis < X::rank, "kiln::count: the axis is out of range for the operand's rank");
  constexpr int a = detail::axis_index<Axis, X::rank>;
  return Node<Count<a, false>, X>(Count<a, false>{}, x);
}
template <Expression X>
constexpr auto count(X x) {
  return Node<Count<0, true>, X>(Count<0, true>{}, x);
}

}  // namespace kiln
