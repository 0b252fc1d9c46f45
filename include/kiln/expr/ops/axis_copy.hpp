// kiln: ops that copy ranges along one axis, all run by the axis-copy kernel kind. Along axis
// A the output is made of segments, each copying a contiguous range of one source's positions
// to a range of the output's; every other axis is copied whole; positions no segment covers
// are 0. Sources are read through their own strides (a transposed view costs no copy).
//   concat<A>(a, b)                    a then b along A; every other extent must agree
//   slice<A, Begin, End>(x)            positions [Begin, End) of x along A
//   slice<A>(x, begin, end)            the same with run-time positions (values of the expression)
//   extract<A, Off>(x, o..., like)     like's shape, from x at position Off + the extents of o...
//   insert<A, Off>(x, o..., like)      like's shape, x placed at Off + the extents of o..., 0 elsewhere
//   swap_halves<A>(x)                  x's second half along A, then its first (an even extent)
//   chunk<N, A>(x)                     a tuple of the N equal parts of x along A (torch.chunk,
//                                      with an extent that N divides), each one kernel
//   concat_parts<A>(p0, p1[, p2])      parts of one shape one after the other along A: chunk's
//                                      inverse, one kernel (at most kMaxAxisCopySegments parts)
//   split<A, S...>(x)                  a tuple of the parts of extents S... along A (slices)
// extract and insert take their offset partly from other values' shapes (o..., read for their
// shapes only), and their result's shape from `like`; extract<A>(x, off, like) and
// insert<A>(x, off, like) take a run-time offset instead: they are the derivatives of the others
// (concat's gradient for b is extract<A, 0>(g, a, b); slice's is insert<A, Begin>(g, x)), and
// each other's adjoints.
//
// Windows at a position computed or bound at run time (pos: a rank-0 kiln::i32 or kiln::i64
// expression, read where the kernel runs, so one plan and one CUDA graph serve every position):
//   write_slice<A>(x, pos, src)        x with positions [pos, pos + n) along A replaced by src
//                                      (n: src's extent along A; its other extents are x's)
//   extract<A>(x, pos, like)           like's extent of x along A from pos
//   insert<A>(x, pos, like)            like's shape, x placed at pos, 0 elsewhere
//   zero_window<A>(x, pos, window)     x with window's extent along A from pos set to 0
// A position that puts the window past the axis is an IndexError on the CPU (checked before
// the call's first kernel) and is clamped to the axis on CUDA. A static KV cache is written with
// kiln::assign(cache, write_slice<2>(cache, pos, k_new)): the assignment is done in place,
// writing only the window, when no later kernel reads the old cache (explain() says so).
#pragma once
#include <array>
#include <tuple>
#include <utility>

#include "kiln/expr/node.hpp"
#include "kiln/expr/zero.hpp"

namespace kiln {

template <int Axis>
struct Concat;
template <int Axis, long Begin, long End>
struct Slice;
template <int Axis, long Off, int NOffsets>
struct Extract;
template <int Axis, long Off, int NOffsets>
struct Insert;
template <int Axis>
struct SliceAt;
template <int Axis, AxisCopyForm Form>
struct WindowAt;
template <int Axis>
struct SwapHalves;
template <int Axis, int K, int N>
struct Chunk;
template <int Axis, int K, int N>
struct ChunkInsert;
template <int Axis, int N>
struct ConcatParts;

template <int Axis, Expression A, Expression B>
constexpr auto concat(A a, B b);
template <int Axis, long Begin, long End, Expression X>
constexpr auto slice(X x);
template <int Axis, long Off, Expression X, Expression... Rest>
constexpr auto extract(X x, Rest... rest);
template <int Axis, long Off, Expression X, Expression... Rest>
constexpr auto insert(X x, Rest... rest);
template <int Axis, Expression X>
constexpr auto slice(X x, long begin, long end);
template <int Axis, Expression X, Expression L>
constexpr auto extract(X x, long offset, L like);
template <int Axis, Expression X, Expression L>
constexpr auto insert(X x, long offset, L like);
template <int Axis, Expression X>
constexpr auto swap_halves(X x);
template <int Axis, Expression X, Expression P, Expression S>
constexpr auto write_slice(X x, P pos, S src);
template <int Axis, Expression X, Expression P, Expression L>
constexpr auto extract(X x, P pos, L like);
template <int Axis, Expression X, Expression P, Expression L>
constexpr auto insert(X x, P pos, L like);
template <int Axis, Expression X, Expression P, Expression W>
constexpr auto zero_window(X x, P pos, W window);
template <int Axis, int K, int N, Expression X>
constexpr auto chunk_part(X x);
template <int Axis, int K, int N, Expression X, Expression L>
constexpr auto chunk_insert(X x, L like);
template <int Axis, Expression X, Expression... Rest>
constexpr auto concat_parts(X x, Rest... rest);

namespace detail {
// The fields every axis-copy op has; Form says how the planner reads its operands.
template <int Axis, AxisCopyForm Form, long Begin = 0, long End = 0>
struct AxisCopyOp {
  static constexpr NodeKind kind = NodeKind::AxisCopy;
  static constexpr bool composite = false;
  static constexpr int axis = Axis;
  static constexpr AxisCopyForm copy_form = Form;
  static constexpr long begin = Begin;  // Slice: the first position; Extract, Insert: the static offset
  static constexpr long end = End;      // Slice: one past the last position
  template <int R, int...>
  static constexpr int out_rank = R;
};
// Operand k of an extract or insert other than the first is read for its shape only.
template <int NOperands>
inline constexpr unsigned all_but_first = ((1u << NOperands) - 1u) & ~1u;
}  // namespace detail

template <int Axis>
struct Concat : detail::AxisCopyOp<Axis, AxisCopyForm::Concat> {
  static constexpr const char* name = "concat";
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& [a, b] = y.children;
    return std::tuple{extract<Axis, 0>(g, a), extract<Axis, 0>(g, a, b)};
  }
  template <class N, class Ta, class Tb>
  static constexpr auto jvp(const N& y, const Ta& ta, const Tb& tb) {
    const auto& a = std::get<0>(y.children);
    if constexpr (std::is_same_v<Ta, autodiff::NoGrad> && std::is_same_v<Tb, autodiff::NoGrad>) return autodiff::NoGrad{};
    else if constexpr (std::is_same_v<Tb, autodiff::NoGrad>) return insert<Axis, 0>(ta, y);
    else if constexpr (std::is_same_v<Ta, autodiff::NoGrad>) return insert<Axis, 0>(tb, a, y);
    else return concat<Axis>(ta, tb);
  }
};

template <int Axis, long Begin, long End>
struct Slice : detail::AxisCopyOp<Axis, AxisCopyForm::Slice, Begin, End> {
  static constexpr const char* name = "slice";
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{insert<Axis, Begin>(g, std::get<0>(y.children))};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N&, const Tx& t) {
    return autodiff::tangent_apply([](const auto& v) { return slice<Axis, Begin, End>(v); }, t);
  }
};

// The run-time forms: the positions are values of the op (runtime_begin, runtime_end), which
// reach the planner as the node's parameters; the kernel is the same.
template <int Axis>
struct SliceAt : detail::AxisCopyOp<Axis, AxisCopyForm::Slice> {
  static constexpr const char* name = "slice";
  long runtime_begin = 0, runtime_end = 0;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::tuple{insert<Axis>(g, y.op.runtime_begin, std::get<0>(y.children))};
  }
  template <class N, class Tx>
  static constexpr auto jvp(const N& y, const Tx& t) {
    return autodiff::tangent_apply([&](const auto& v) { return slice<Axis>(v, y.op.runtime_begin, y.op.runtime_end); }, t);
  }
};
// extract<A>(x, off, like) and insert<A>(x, off, like): like's shape; each the other's adjoint.
template <int Axis, AxisCopyForm Form>
struct WindowAt : detail::AxisCopyOp<Axis, Form> {
  static constexpr const char* name = Form == AxisCopyForm::Extract ? "extract" : "insert";
  static constexpr unsigned shape_only = 2u;  // like, read for its shape
  long runtime_begin = 0, runtime_end = 0;    // the offset; end unused
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& x = std::get<0>(y.children);
    if constexpr (Form == AxisCopyForm::Extract) return std::tuple{insert<Axis>(g, y.op.runtime_begin, x), autodiff::NoGrad{}};
    else return std::tuple{extract<Axis>(g, y.op.runtime_begin, x), autodiff::NoGrad{}};
  }
  template <class N, class Tx, class Tl>
  static constexpr auto jvp(const N& y, const Tx& t, const Tl&) {
    const auto& like = std::get<1>(y.children);
    return autodiff::tangent_apply(
        [&](const auto& v) {
          if constexpr (Form == AxisCopyForm::Extract) return extract<Axis>(v, y.op.runtime_begin, like);
          else return insert<Axis>(v, y.op.runtime_begin, like);
        },
        t);
  }
};

// Both operands are x (segment k reads operand k): out = [x[h:], x[:h]] along the axis. The
// swap is its own inverse and a permutation, so its adjoint is itself; the whole cotangent goes
// to the first operand, which is x as much as the second is.
template <int Axis>
struct SwapHalves : detail::AxisCopyOp<Axis, AxisCopyForm::SwapHalves> {
  static constexpr const char* name = "swap_halves";
  template <class N, class G>
  static constexpr auto vjp(const N&, const G& g) {
    return std::tuple{swap_halves<Axis>(g), autodiff::NoGrad{}};
  }
  template <class N, class Tx, class Tx2>
  static constexpr auto jvp(const N&, const Tx& t, const Tx2&) {
    return autodiff::tangent_apply([](const auto& v) { return swap_halves<Axis>(v); }, t);
  }
};

// Part K of N equal parts of x along the axis; its adjoint places a part at its position in
// like's shape (zeros elsewhere), and each is the other's derivative.
template <int Axis, int K, int N>
struct Chunk : detail::AxisCopyOp<Axis, AxisCopyForm::Chunk, K, N> {
  static constexpr const char* name = "chunk";
  template <class N_, class G>
  static constexpr auto vjp(const N_& y, const G& g) {
    return std::tuple{chunk_insert<Axis, K, N>(g, std::get<0>(y.children))};
  }
  template <class N_, class Tx>
  static constexpr auto jvp(const N_&, const Tx& t) {
    return autodiff::tangent_apply([](const auto& v) { return chunk_part<Axis, K, N>(v); }, t);
  }
};
template <int Axis, int K, int N>
struct ChunkInsert : detail::AxisCopyOp<Axis, AxisCopyForm::ChunkInsert, K, N> {
  static constexpr const char* name = "chunk_insert";
  static constexpr unsigned shape_only = 2u;  // like, read for its shape
  template <class N_, class G>
  static constexpr auto vjp(const N_&, const G& g) {
    return std::tuple{chunk_part<Axis, K, N>(g), autodiff::NoGrad{}};
  }
  template <class N_, class Tx, class Tl>
  static constexpr auto jvp(const N_& y, const Tx& t, const Tl&) {
    const auto& like = std::get<1>(y.children);
    return autodiff::tangent_apply([&](const auto& v) { return chunk_insert<Axis, K, N>(v, like); }, t);
  }
};

// The N parts of one shape, one after the other along the axis; the adjoint of part K is part
// K of the gradient. A tangent of some parts only (the others constant) places those parts in
// y's shape, zeros elsewhere.
template <int Axis, int N>
struct ConcatParts : detail::AxisCopyOp<Axis, AxisCopyForm::ConcatParts, 0, N> {
  static constexpr const char* name = "concat_parts";
  template <class N_, class G>
  static constexpr auto vjp(const N_&, const G& g) {
    return [&]<std::size_t... K>(std::index_sequence<K...>) {
      return std::tuple{chunk_part<Axis, static_cast<int>(K), N>(g)...};
    }(std::make_index_sequence<N>{});
  }
  template <class N_, class... Ts>
  static constexpr auto jvp(const N_& y, const Ts&... ts) {
    if constexpr (!(std::is_same_v<Ts, autodiff::NoGrad> || ...)) return concat_parts<Axis>(ts...);
    else return placed_parts<0>(y, autodiff::NoGrad{}, ts...);
  }

 private:
  // acc + each tangent from part K on placed at its position in y's shape (chunk_insert).
  template <int K, class Y, class Acc>
  static constexpr auto placed_parts(const Y&, const Acc& acc) {
    return acc;
  }
  template <int K, class Y, class Acc, class T, class... Rest>
  static constexpr auto placed_parts(const Y& y, const Acc& acc, const T& t, const Rest&... rest) {
    const auto part = autodiff::tangent_apply([&](const auto& v) { return chunk_insert<Axis, K, N>(v, y); }, t);
    return placed_parts<K + 1>(y, autodiff::add_cotangents(acc, part), rest...);
  }
};

// The windows at a run-time position: operands (x, src or like or window, pos). Each is
// linear in x (and src), and the derivatives are the others over the same position.
template <int Axis, AxisCopyForm Form>
struct WindowAtPosition : detail::AxisCopyOp<Axis, Form> {
  static constexpr const char* name = Form == AxisCopyForm::WriteAt     ? "write_slice"
                                      : Form == AxisCopyForm::ExtractAt ? "extract"
                                      : Form == AxisCopyForm::InsertAt  ? "insert"
                                                                        : "zero_window";
  static constexpr bool takes_indices = true, index_last = true;
  static constexpr unsigned shape_only = Form == AxisCopyForm::WriteAt ? 0u : 2u;  // like, window: shapes only
  template <class T, class...>
  using dtype = T;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    const auto& [x, other, pos] = y.children;
    using autodiff::NoGrad;
    if constexpr (Form == AxisCopyForm::WriteAt)
      return std::tuple{zero_window<Axis>(g, pos, other), extract<Axis>(g, pos, other), NoGrad{}};
    else if constexpr (Form == AxisCopyForm::ExtractAt) return std::tuple{insert<Axis>(g, pos, x), NoGrad{}, NoGrad{}};
    else if constexpr (Form == AxisCopyForm::InsertAt) return std::tuple{extract<Axis>(g, pos, x), NoGrad{}, NoGrad{}};
    else return std::tuple{zero_window<Axis>(g, pos, other), NoGrad{}, NoGrad{}};
  }
  template <class N, class Tx, class To, class Tp>
  static constexpr auto jvp(const N& y, const Tx& tx, const To& to, const Tp&) {
    const auto& [x, other, pos] = y.children;
    using autodiff::NoGrad;
    if constexpr (Form == AxisCopyForm::WriteAt) {
      if constexpr (std::is_same_v<Tx, NoGrad> && std::is_same_v<To, NoGrad>) return NoGrad{};
      else if constexpr (std::is_same_v<To, NoGrad>) return zero_window<Axis>(tx, pos, other);
      else if constexpr (std::is_same_v<Tx, NoGrad>) return insert<Axis>(to, pos, x);
      else return write_slice<Axis>(tx, pos, to);
    } else {
      return autodiff::tangent_apply(
          [&](const auto& v) {
            if constexpr (Form == AxisCopyForm::ExtractAt) return extract<Axis>(v, pos, other);
            else if constexpr (Form == AxisCopyForm::InsertAt) return insert<Axis>(v, pos, other);
            else return zero_window<Axis>(v, pos, other);
          },
          tx);
    }
  }
};

namespace detail {
// Form<Off>(v, o..., like) over the offset operands o... of children c (those between the first
// and the last); Form is Extract or Insert.
template <AxisCopyForm Form, int Axis, long Off, int NOffsets, class V, class Children, class Like>
constexpr auto window_over(const V& v, const Children& c, const Like& like) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    if constexpr (Form == AxisCopyForm::Insert) return insert<Axis, Off>(v, std::get<1 + I>(c)..., like);
    else return extract<Axis, Off>(v, std::get<1 + I>(c)..., like);
  }(std::make_index_sequence<NOffsets>{});
}

// The adjoint pair: extract reads like's extent from x at the offset, insert writes x there.
// Each one's derivative with respect to x is the other over the same offset operands; its
// tangent is itself over them.
template <AxisCopyForm Form, int Axis, long Off, int NOffsets>
struct WindowOp : AxisCopyOp<Axis, Form, Off> {
  static constexpr AxisCopyForm adjoint = Form == AxisCopyForm::Extract ? AxisCopyForm::Insert : AxisCopyForm::Extract;
  static constexpr unsigned shape_only = all_but_first<NOffsets + 2>;
  template <class N, class G>
  static constexpr auto vjp(const N& y, const G& g) {
    return std::apply(
        [&](const auto& x, const auto&... rest) {
          return std::tuple{window_over<adjoint, Axis, Off, NOffsets>(g, y.children, x), ((void)rest, autodiff::NoGrad{})...};
        },
        y.children);
  }
  template <class N, class Tx, class... Tr>
  static constexpr auto jvp(const N& y, const Tx& t, const Tr&...) {
    const auto& like = std::get<std::tuple_size_v<decltype(y.children)> - 1>(y.children);
    return autodiff::tangent_apply([&](const auto& v) { return window_over<Form, Axis, Off, NOffsets>(v, y.children, like); },
                                   t);
  }
};
}  // namespace detail

template <int Axis, long Off, int NOffsets>
struct Extract : detail::WindowOp<AxisCopyForm::Extract, Axis, Off, NOffsets> {
  static constexpr const char* name = "extract";
};
template <int Axis, long Off, int NOffsets>
struct Insert : detail::WindowOp<AxisCopyForm::Insert, Axis, Off, NOffsets> {
  static constexpr const char* name = "insert";
};

namespace detail {
// Where part i of split<A, S...> begins: the sum of the extents before it.
template <long... S>
constexpr long part_begin(std::size_t i) {
  long b = 0;
  std::size_t j = 0;
  for (long s : std::array<long, sizeof...(S)>{S...})
    if (j++ < i) b += s;
  return b;
}
template <int Axis, int Rank>
constexpr int normalized_axis() {
  static_assert(Rank >= 1, "kiln: concat, slice, extract and insert need an operand of rank 1 or more");
  static_assert(Axis >= -Rank && Axis < Rank, "kiln: the axis is out of range for the operand's rank");
  return axis_index<Axis, Rank>;
}
template <class X, class... Rest>
constexpr void same_rank_and_type() {
  static_assert(((Rest::rank == X::rank) && ...), "kiln: the operands of concat, extract and insert must have one rank");
  static_assert((std::is_same_v<typename X::dtype, typename Rest::dtype> && ...),
                "kiln: the operands of concat, extract and insert must have one element type");
}
}  // namespace detail

template <int Axis, Expression A, Expression B>
constexpr auto concat(A a, B b) {
  detail::same_rank_and_type<A, B>();
  constexpr int ax = detail::normalized_axis<Axis, A::rank>();
  return Node<Concat<ax>, A, B>(Concat<ax>{}, a, b);
}

template <int Axis, long Begin, long End, Expression X>
constexpr auto slice(X x) {
  static_assert(0 <= Begin && Begin <= End, "kiln::slice: needs 0 <= Begin <= End (End is one past the last position)");
  constexpr int ax = detail::normalized_axis<Axis, X::rank>();
  return Node<Slice<ax, Begin, End>, X>(Slice<ax, Begin, End>{}, x);
}

template <int Axis, Expression X>
constexpr auto slice(X x, long begin, long end) {
  constexpr int ax = detail::normalized_axis<Axis, X::rank>();
  SliceAt<ax> op{};
  op.runtime_begin = begin;
  op.runtime_end = end;
  return Node<SliceAt<ax>, X>(op, x);
}
namespace detail {
template <AxisCopyForm Form, int Axis, class X, class L>
constexpr auto window_at(X x, long offset, L like) {
  same_rank_and_type<X, L>();
  constexpr int ax = normalized_axis<Axis, X::rank>();
  WindowAt<ax, Form> op{};
  op.runtime_begin = offset;
  return Node<WindowAt<ax, Form>, X, L>(op, x, like);
}
}  // namespace detail
template <int Axis, Expression X, Expression L>
constexpr auto extract(X x, long offset, L like) {
  return detail::window_at<AxisCopyForm::Extract, Axis>(x, offset, like);
}
template <int Axis, Expression X, Expression L>
constexpr auto insert(X x, long offset, L like) {
  return detail::window_at<AxisCopyForm::Insert, Axis>(x, offset, like);
}

namespace detail {
template <AxisCopyForm Form, int Axis, class X, class O, class P>
constexpr auto window_at_position(X x, P pos, O other) {
  static_assert(is_index_element_v<typename P::dtype> && P::rank == 0,
                "kiln::write_slice / extract / insert / zero_window: the position must be a rank-0 kiln::i32 or kiln::i64 "
                "expression (a scalar input, read where the kernel runs)");
  static_assert(is_index_input_v<P>,
                "kiln::write_slice / extract / insert / zero_window: the position must be an input (kiln::input<\"pos\", 0, "
                "kiln::i64>()), not a computed value: it is checked against the axis before the call's first kernel");
  static_assert(is_float_element_v<typename X::dtype>, "kiln::write_slice / extract / insert / zero_window: x must be a float tensor");
  same_rank_and_type<X, O>();
  constexpr int ax = normalized_axis<Axis, X::rank>();
  using Op = WindowAtPosition<ax, Form>;
  return Node<Op, X, O, P>(Op{}, x, other, pos);
}
}  // namespace detail
template <int Axis, Expression X, Expression P, Expression S>
constexpr auto write_slice(X x, P pos, S src) {
  return detail::window_at_position<AxisCopyForm::WriteAt, Axis>(x, pos, src);
}
template <int Axis, Expression X, Expression P, Expression L>
constexpr auto extract(X x, P pos, L like) {
  return detail::window_at_position<AxisCopyForm::ExtractAt, Axis>(x, pos, like);
}
template <int Axis, Expression X, Expression P, Expression L>
constexpr auto insert(X x, P pos, L like) {
  return detail::window_at_position<AxisCopyForm::InsertAt, Axis>(x, pos, like);
}
template <int Axis, Expression X, Expression P, Expression W>
constexpr auto zero_window(X x, P pos, W window) {
  return detail::window_at_position<AxisCopyForm::ZeroAt, Axis>(x, pos, window);
}

template <int Axis, Expression X>
constexpr auto swap_halves(X x) {
  constexpr int ax = detail::normalized_axis<Axis, X::rank>();
  return Node<SwapHalves<ax>, X, X>(SwapHalves<ax>{}, x, x);
}

template <int Axis, int K, int N, Expression X>
constexpr auto chunk_part(X x) {
  static_assert(N >= 1 && K >= 0 && K < N, "kiln::chunk: part K of N needs 0 <= K < N");
  constexpr int ax = detail::normalized_axis<Axis, X::rank>();
  return Node<Chunk<ax, K, N>, X>(Chunk<ax, K, N>{}, x);
}
template <int Axis, int K, int N, Expression X, Expression L>
constexpr auto chunk_insert(X x, L like) {
  detail::same_rank_and_type<X, L>();
  constexpr int ax = detail::normalized_axis<Axis, X::rank>();
  return Node<ChunkInsert<ax, K, N>, X, L>(ChunkInsert<ax, K, N>{}, x, like);
}

// The N equal parts of x along the axis, as a tuple: auto [q, k, v] = chunk<3, -1>(qkv). The
// extent must be a multiple of N (a ShapeError at the call otherwise).
template <int N, int Axis, Expression X>
constexpr auto chunk(X x) {
  static_assert(N >= 1, "kiln::chunk: the number of parts must be at least 1");
  return [&]<std::size_t... K>(std::index_sequence<K...>) {
    return std::tuple{chunk_part<Axis, static_cast<int>(K), N>(x)...};
  }(std::make_index_sequence<N>{});
}

// The parts x, rest... (each of x's shape) one after the other along the axis, in one kernel:
// auto qkv = concat_parts<-1>(q, k, v) is chunk<3, -1>'s inverse. Parts of different shapes
// are a ShapeError at the call.
template <int Axis, Expression X, Expression... Rest>
constexpr auto concat_parts(X x, Rest... rest) {
  constexpr int n = 1 + static_cast<int>(sizeof...(Rest));
  static_assert(n >= 2 && n <= kMaxAxisCopySegments,
                "kiln::concat_parts: give 2 or 3 parts (one axis copy has at most kMaxAxisCopySegments sources); "
                "concat the result with kiln::concat for more");
  detail::same_rank_and_type<X, Rest...>();
  constexpr int ax = detail::normalized_axis<Axis, X::rank>();
  return Node<ConcatParts<ax, n>, X, Rest...>(ConcatParts<ax, n>{}, x, rest...);
}

// The parts of extents S... of x along the axis, in order from position 0, as a tuple of
// slices (torch.split with a list of sizes): auto [a, b] = split<-1, 64, 192>(x). The parts
// need not cover the axis; one that ends past it is a ShapeError at the call.
template <int Axis, long... S, Expression X>
constexpr auto split(X x) {
  static_assert(sizeof...(S) >= 1 && ((S >= 0) && ...), "kiln::split: give the extent of each part, none negative");
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::tuple{slice<Axis, detail::part_begin<S...>(I), detail::part_begin<S...>(I + 1)>(x)...};
  }(std::make_index_sequence<sizeof...(S)>{});
}

namespace detail {
// extract and insert: x, then up to one offset operand, then the operand giving the shape.
template <template <int, long, int> class Op, int Axis, long Off, class X, class... Rest>
constexpr auto window(X x, Rest... rest) {
  static_assert(sizeof...(Rest) >= 1 && sizeof...(Rest) <= 2,
                "kiln::extract / kiln::insert (x, [offset operand,] like): one or two operands after x, the last "
                "giving the result's shape");
  static_assert(Off >= 0, "kiln::extract / kiln::insert: the offset must not be negative");
  same_rank_and_type<X, Rest...>();
  constexpr int ax = normalized_axis<Axis, X::rank>();
  using O = Op<ax, Off, static_cast<int>(sizeof...(Rest)) - 1>;
  return Node<O, X, Rest...>(O{}, x, rest...);
}
}  // namespace detail

template <int Axis, long Off, Expression X, Expression... Rest>
constexpr auto extract(X x, Rest... rest) {
  return detail::window<Extract, Axis, Off>(x, rest...);
}

template <int Axis, long Off, Expression X, Expression... Rest>
constexpr auto insert(X x, Rest... rest) {
  return detail::window<Insert, Axis, Off>(x, rest...);
}

}  // namespace kiln
