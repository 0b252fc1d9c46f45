// kiln: the expression types. An expression's type is its computation graph; leaves are
// symbols (bound to tensors at call time) and scalar constants (stored by value).
//
// Invariants:
// - Symbols and nodes without stored values are empty types ("stateless"); CSE may merge two
//   occurrences of the same stateless type. A node that stores a value (a Constant, a reshape's
//   extents, layer_norm's eps) is never merged: `x * 1.5f` and `x * 2.5f` have one type.
// - "Keyed" values are known by their type: stateless ones, Shared values (one value per tag),
//   and nodes whose op stores nothing over keyed operands (matmul(shared_a, w)). The graph
//   merges every occurrence of one keyed type into one node, so a derivative rule that reads
//   such an operand at several places computes it once.
// - A symbol's type is keyed by the FNV-1a hash of its name; the name itself is a char pack,
//   so no class-type template argument ever reaches a kernel (DESIGN.md, Lowering).
#pragma once
#include <cstdint>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "kiln/core/config.hpp"
#include "kiln/core/fixed_string.hpp"
#include "kiln/core/tensor.hpp"

namespace kiln {

enum class NodeKind : std::uint8_t {
  Symbol,
  Constant,  // a Constant leaf, or a value derived from an operand's shape (kiln::count)
  Pointwise,
  Reduce,
  Matmul,
  Permute,      // a view with its axes reordered (transpose, permute)
  Reshape,
  Unsqueeze,    // a view with one more axis of extent 1
  ReshapeLike,  // a view with another value's shape
  ReduceTo,     // a sum down to another value's shape (the adjoint of broadcasting)
  AxisCopy,     // ranges along one axis copied from sources (concat, slice; expr/ops/axis_copy.hpp)
  IndexRows,    // rows of a table gathered, or scattered and summed, by integer ids (expr/ops/index.hpp)
  Attention,    // softmax(q k^T) v and its derivatives, never materialising q k^T (expr/ops/attention.hpp)
  Convert,      // values converted to another element type (kiln::cast; expr/ops/cast.hpp)
  Dropout,      // elements kept or zeroed by a counter-based random mask (expr/ops/dropout.hpp)
  Shared        // kiln::shared: an alias, never a node of the graph (flattening resolves it)
};
// The most operands an op takes (attention's backward: q, k, v, its cotangent and two row
// statistics).
inline constexpr int kMaxOperands = 6;

enum class SymbolKind : std::uint8_t { Input, Param };
enum class ReduceKind : std::uint8_t { Sum, Mean, Max, Min };
// The ops of the AxisCopy kind (expr/ops/axis_copy.hpp). The *At forms place their window at a
// position read where the kernel runs (an integer operand), not at one fixed when planning.
enum class AxisCopyForm : std::uint8_t {
  Concat,
  Slice,
  Extract,
  Insert,
  SwapHalves,
  Chunk,
  ChunkInsert,
  WriteAt,    // write_slice: x with a window replaced by src
  ExtractAt,  // extract at a run-time position
  InsertAt,   // insert at a run-time position
  ZeroAt,     // x with a window set to 0 (write_slice's derivative for x)
  ConcatParts // equal parts one after the other (chunk's inverse)
};
// The most segments one axis copy has (the sources of a concat_parts).
inline constexpr int kMaxAxisCopySegments = 3;
// Attention (expr/ops/attention.hpp): its mask, and its parts, each a kernel of the attention
// kind (the kernels' Part argument is the part's number).
enum class AttentionMask : std::uint8_t { None, Causal };
enum class AttentionPart : std::uint8_t { Out, Stats, GradQ, GradK, GradV };

// An integer operand that an op reads through its own pointer (embedding's ids, attention's
// kv_len, a window's position) must be an input: the CPU checks such indices before a call's
// first kernel, when only inputs hold values.
template <class I>
inline constexpr bool is_index_input_v = I::kind == NodeKind::Symbol;

// Every expression type derives from ExprTag.
struct ExprTag {};
template <class E>
concept Expression = std::is_base_of_v<ExprTag, std::remove_cvref_t<E>>;
template <class S>
concept Scalar = std::is_arithmetic_v<S>;

// What `x = tensor` makes: the symbol's id and the tensor, checked against the symbol's type.
// N is the symbol's name (kiln::Name<'x'>), so that a compile error about a binding shows it.
template <std::uint64_t Id, class T, class N = void>
struct Binding {
  using name_type = N;
  static constexpr std::uint64_t id = Id;
  const Tensor<T>* tensor;
  Tensor<T>* mutable_tensor = nullptr;  // set when bound to a non-const tensor (kiln::assign)
};

template <std::uint64_t Id, int Rank, class T, SymbolKind K, class N>
struct Symbol : ExprTag {
  using dtype = T;
  using name_type = N;
  static constexpr int rank = Rank;
  static constexpr NodeKind kind = NodeKind::Symbol;
  static constexpr SymbolKind symbol_kind = K;
  static constexpr bool stateless = true;
  static constexpr bool keyed = true;
  static constexpr std::uint64_t id = Id;
  static constexpr std::string_view name() { return N::view(); }

  // Binding: `f(x = xt)`. The tensor must outlive the call.
  template <class U>
  constexpr Binding<Id, T, N> operator=(const Tensor<U>& t) const {
    static_assert(std::is_same_v<U, T>,
                  "kiln: the tensor bound to this symbol has a different element type than the "
                  "symbol was declared with (kiln::input<name, rank, T>); convert the tensor");
    return {&t};
  }
  template <class U>
  constexpr Binding<Id, T, N> operator=(Tensor<U>& t) const {
    static_assert(std::is_same_v<U, T>,
                  "kiln: the tensor bound to this symbol has a different element type than the "
                  "symbol was declared with (kiln::input<name, rank, T>); convert the tensor");
    return {&t, &t};
  }
};

// A scalar literal, stored by value: rank 0, broadcast everywhere.
template <class T>
struct Constant : ExprTag {
  using dtype = T;
  static constexpr int rank = 0;
  static constexpr NodeKind kind = NodeKind::Constant;
  static constexpr bool stateless = false;
  static constexpr bool keyed = false;
  compute_t<T> value;  // a bf16 or f16 expression's constants stay in float, as its maths does
  constexpr explicit Constant(compute_t<T> v) : value(v) {}
};

// A reference to a node already in a flattened graph: composite ops (softmax, layer_norm)
// expand over Refs to their operands, so each operand is computed once even when it holds
// constants. Only the graph builder creates them.
template <int NodeId, int Rank, class T>
struct Ref : ExprTag {
  using dtype = T;
  static constexpr int rank = Rank;
  static constexpr bool stateless = true;
  static constexpr bool keyed = true;
};

// A value computed once however often it occurs: every occurrence of one Shared type is one
// node of the graph, even when the value holds constants (which otherwise keep equal-looking
// subtrees apart, see the invariants above). Tag names it; the gradients of kiln::grad and the
// optimizers' intermediate states are Shared, so a gradient used three times is computed once.
// Invariant: occurrences of one Shared type hold equal values; compile() checks this and
// throws kiln::BindingError otherwise. Only kiln::shared and the library make them.
template <std::uint64_t Tag, class E>
struct Shared : ExprTag {
  using dtype = typename E::dtype;
  using value_type = E;
  static constexpr int rank = E::rank;
  static constexpr NodeKind kind = NodeKind::Shared;
  static constexpr bool stateless = false;
  static constexpr bool keyed = true;
  static constexpr std::uint64_t tag = Tag;
  E value;
};

// Wraps e in Shared<Tag> when it holds values; a stateless value is merged by type anyway.
template <std::uint64_t Tag, Expression E>
constexpr auto share(const E& e) {
  if constexpr (E::stateless || E::kind == NodeKind::Shared || E::kind == NodeKind::Symbol) return e;
  else return Shared<Tag, E>{{}, e};
}

namespace detail {
// Axis A of a rank-R value, a negative A counting from the end. Each op checks the range
// itself, with a static_assert that names the op.
template <int A, int R>
inline constexpr int axis_index = A < 0 ? A + R : A;

template <class Op>
constexpr unsigned shape_only_of() {
  if constexpr (requires { Op::shape_only; }) return Op::shape_only;
  else return 0u;
}

template <class Op>
constexpr bool takes_indices() {
  if constexpr (requires { Op::takes_indices; }) return Op::takes_indices;
  else return false;
}
// An op that computes on integer operands as well, its result of their type: specialised true
// by the pointwise ops that are exact on integers (expr/ops/pointwise.hpp).
template <class Op>
inline constexpr bool integer_op = false;
template <class Op, class... Cs>
constexpr auto op_dtype() {
  if constexpr (requires { typename Op::template dtype<typename Cs::dtype...>; })
    return std::type_identity<typename Op::template dtype<typename Cs::dtype...>>{};
  else return std::type_identity<std::common_type_t<typename Cs::dtype...>>{};
}
template <class Op, class... Cs>
struct node_traits {  // a primitive op: Op::dtype<operand types...>, or their common type
  using dtype = typename decltype(op_dtype<Op, Cs...>())::type;
  static constexpr int rank = Op::template out_rank<Cs::rank...>;
};
template <class Op, class... Cs>
  requires Op::composite
struct node_traits<Op, Cs...> {  // a composite op: the traits of its expansion
  using expansion = decltype(std::declval<const Op&>().expand(std::declval<Cs>()...));
  using dtype = typename expansion::dtype;
  static constexpr int rank = expansion::rank;
};
}  // namespace detail

// An op applied to operands. `op` holds the op's stored values, if any.
template <class Op, class... Cs>
struct Node : ExprTag {
  static_assert(sizeof...(Cs) <= kMaxOperands, "kiln: an op takes at most kiln::kMaxOperands operands");
  static_assert(detail::takes_indices<Op>() || detail::integer_op<Op> || (!is_index_element_v<typename Cs::dtype> && ...),
                "kiln: this op does not compute on integer tensors (kiln::i32, kiln::i64). Integers take comparisons, "
                "where, +, -, *, maximum, minimum, abs and neg, and are read by the ops that take indices "
                "(kiln::embedding); convert with kiln::cast<float>(x) for anything else");
  using op_type = Op;
  using dtype = typename detail::node_traits<Op, Cs...>::dtype;
  static constexpr int rank = detail::node_traits<Op, Cs...>::rank;
  static constexpr NodeKind kind = Op::kind;
  static constexpr bool stateless = std::is_empty_v<Op> && (Cs::stateless && ...);
  static constexpr bool keyed = std::is_empty_v<Op> && (Cs::keyed && ...);

  [[no_unique_address]] Op op;
  std::tuple<Cs...> children;
  constexpr explicit Node(Op o, Cs... cs) : op(o), children(cs...) {}
};

// kiln::assign(w, value), given among kiln::outputs(...): the call writes value into the tensor
// bound to the symbol w, after every kernel of the call (so after every read of w's old value).
// w must be bound to a non-const tensor of value's shape.
template <class S, class E>
struct Assign {
  using target_type = S;
  using value_type = E;
  S target;
  E value;
};
template <Expression S, Expression E>
constexpr Assign<S, E> assign(S target, E value) {
  static_assert(S::kind == NodeKind::Symbol, "kiln::assign: the target must be a symbol (a kiln::param or kiln::input)");
  static_assert(S::rank == E::rank && std::is_same_v<typename S::dtype, typename E::dtype>,
                "kiln::assign: the value must have the target's rank and element type");
  return {target, value};
}

template <class X>
struct output_item {  // an expression output
  using value_type = X;
  static constexpr bool assigns = false;
  static constexpr const X& value(const X& x) { return x; }
};
template <class S, class E>
struct output_item<Assign<S, E>> {
  using value_type = E;
  static constexpr bool assigns = true;
  static constexpr const E& value(const Assign<S, E>& a) { return a.value; }
};
template <class X>
concept OutputItem = Expression<X> || output_item<std::remove_cvref_t<X>>::assigns;

// Several expressions compiled as one program: `kiln::compile(kiln::outputs(y, kiln::sum(y)))`.
template <class... Es>
struct Outputs {
  std::tuple<Es...> items;
};
template <OutputItem... Es>
constexpr Outputs<std::remove_cvref_t<Es>...> outputs(Es... es) {
  static_assert(sizeof...(Es) > 0, "kiln::outputs: give at least one expression");
  return {{es...}};
}

// Declaring symbols: kiln::input<"x", 2>(), kiln::param<"w", 2, double>().
template <fixed_string S, int Rank, class T, SymbolKind K>
constexpr auto make_symbol() {
  static_assert(Rank >= 0 && Rank <= kMaxRank, "kiln::input/param: the rank must be between 0 and kiln::kMaxRank (6)");
  static_assert(is_element_type_v<T>, "kiln::input/param: the element type must be float, double, kiln::bf16 or kiln::f16");
  static_assert(S.size() > 0, "kiln::input/param: the name must not be empty");
  return []<std::size_t... I>(std::index_sequence<I...>) {
    return Symbol<fnv1a(S.view()), Rank, T, K, Name<S.data[I]...>>{};
  }(std::make_index_sequence<S.size()>{});
}
template <fixed_string S, int Rank, class T = float>
constexpr auto input() {
  return make_symbol<S, Rank, T, SymbolKind::Input>();
}
template <fixed_string S, int Rank, class T = float>
constexpr auto param() {
  return make_symbol<S, Rank, T, SymbolKind::Param>();
}

}  // namespace kiln
