// kiln: row-invariant subtrees of a row kernel's trees, hoisted out of the per-element loop.
// After a row's stages are reduced, a subtree whose leaves are only stages and constants has
// one value for the whole row (a layer norm's rsqrt(var + eps)); a backend evaluates it once
// per row into an extra stage slot instead of once per element. A division by such a value,
// a / s (softmax's normalisation), becomes a * (1 / s) with 1 / s hoisted: within 1.5 ulp of
// the quotient (two roundings instead of one), the same at zeros, infinities and NaN, and
// different only where 1 / s overflows (|s| below 2^-128 in f32). Used by the CUDA row kernel.
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kiln/expr/ops/pointwise.hpp"
#include "kiln/lower/evaluator.hpp"

namespace kiln::lower {

// 1 / x, the hoisted divisor of a division by a row invariant.
struct Reciprocal {
  template <class T, int = significand_bits<T>>
  KILN_HOST_DEVICE KILN_INLINE static T apply(T x) {
    return T(1) / x;
  }
};

// Row-invariant subtrees: an op whose leaves are all stages and constants has one value per row.
template <class Tree>
struct row_invariant : std::false_type {};
template <int K>
struct row_invariant<LStage<K>> : std::true_type {};
template <int C>
struct row_invariant<LConst<C>> : std::true_type {};
template <class Op, class... Args>
struct row_invariant<LOp<Op, Args...>> : std::bool_constant<(row_invariant<Args>::value && ...)> {};

// Tree with each largest row-invariant op subtree replaced by LStage<Base + i>, i counting from
// 0 in visiting order; `list` holds those subtrees (appended to Acc), for a backend to evaluate
// once per row into stage Base + i. A division by a row invariant b (a leaf or an op) becomes
// a product with LStage<Base + i>, Reciprocal(b) in the list.
template <class Tree, int Base, class Acc = TypeList<>, bool Hoist = row_invariant<Tree>::value>
struct hoist_invariants {
  using type = Tree;
  using list = Acc;
};
template <class Op, class... Args, int Base, class... Done>
struct hoist_invariants<LOp<Op, Args...>, Base, TypeList<Done...>, true> {
  using type = LStage<Base + static_cast<int>(sizeof...(Done))>;
  using list = TypeList<Done..., LOp<Op, Args...>>;
};
template <int S, class F, int Base, class Acc>
struct hoist_invariants<LCached<S, F>, Base, Acc, false> {
  using inner = hoist_invariants<F, Base, Acc>;
  using type = LCached<S, typename inner::type>;
  using list = typename inner::list;
};
template <class X, class L>
struct prepend_type;
template <class X, class... Ys>
struct prepend_type<X, TypeList<Ys...>> {
  using type = TypeList<X, Ys...>;
};
// Hoists from each operand in turn, threading the list of hoisted subtrees through.
template <int Base, class Acc, class... As>
struct hoist_each {
  using types = TypeList<>;
  using list = Acc;
};
template <int Base, class Acc, class A, class... As>
struct hoist_each<Base, Acc, A, As...> {
  using head = hoist_invariants<A, Base, Acc>;
  using rest = hoist_each<Base, typename head::list, As...>;
  using types = typename prepend_type<typename head::type, typename rest::types>::type;
  using list = typename rest::list;
};
template <class Op, class Operands>
struct op_of;
template <class Op, class... As>
struct op_of<Op, TypeList<As...>> {
  using type = LOp<Op, As...>;
};
template <class Op, class... Args, int Base, class Acc>
struct hoist_invariants<LOp<Op, Args...>, Base, Acc, false> {
  using each = hoist_each<Base, Acc, Args...>;
  using type = typename op_of<Op, typename each::types>::type;
  using list = typename each::list;
};

template <class X, class L>
struct append_type;
template <class X, class... Ys>
struct append_type<X, TypeList<Ys...>> {
  using type = TypeList<Ys..., X>;
};
template <class A, class B, int Base, class Acc>
  requires(row_invariant<B>::value)
struct hoist_invariants<LOp<Div, A, B>, Base, Acc, false> {
  using left = hoist_invariants<A, Base, Acc>;
  using type = LOp<Mul, typename left::type, LStage<Base + left::list::size>>;
  using list = typename append_type<LOp<Reciprocal, B>, typename left::list>::type;
};

// Whether Tree reads stage S's kept values (an LCached<S, ...>).
template <class Tree, int S>
struct reads_cached : std::false_type {};
template <int S, class F>
struct reads_cached<LCached<S, F>, S> : std::true_type {};
template <int S2, class F, int S>
struct reads_cached<LCached<S2, F>, S> : reads_cached<F, S> {};
template <class Op, class... Args, int S>
struct reads_cached<LOp<Op, Args...>, S> : std::bool_constant<(reads_cached<Args, S>::value || ...)> {};

// Tree (or a stage, or a list of stages) with the LCached of every stage not in Keep (a bit
// mask) replaced by its fallback: those values are recomputed where read, and the stage keeps
// nothing.
template <class Tree, std::uint64_t Keep>
struct keep_cached {
  using type = Tree;
};
template <int S, class F, std::uint64_t Keep>
struct keep_cached<LCached<S, F>, Keep> {
  using inner = typename keep_cached<F, Keep>::type;
  using type = std::conditional_t<((Keep >> S) & 1u) != 0, LCached<S, inner>, inner>;
};
template <class Op, class... Args, std::uint64_t Keep>
struct keep_cached<LOp<Op, Args...>, Keep> {
  using type = LOp<Op, typename keep_cached<Args, Keep>::type...>;
};
template <class... Ss, std::uint64_t Keep>
struct keep_cached<TypeList<Ss...>, Keep> {
  template <int I, class St>
  using one = Stage<St::kind, typename keep_cached<typename St::tree, Keep>::type, St::cached && ((Keep >> I) & 1u) != 0>;
  template <int... I>
  static TypeList<one<I, Ss>...> build(std::integer_sequence<int, I...>);
  using type = decltype(build(std::make_integer_sequence<int, sizeof...(Ss)>{}));
};

}  // namespace kiln::lower
