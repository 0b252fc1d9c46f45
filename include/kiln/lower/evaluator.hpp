// kiln: lowered evaluator trees. A fused kernel's maths is a tree of these types; they carry
// only slot numbers ("load 0", "constant 2", "stage 1"), never symbol names, so two
// expressions of one structure share one instantiation (DESIGN.md, Lowering). Each tree is
// evaluated at position j of the current row through a context that the backend supplies:
//   ctx.template load<S>(j)  the value of load slot S at column j of the row
//   ctx.constant(C)          the value of scalar slot C
//   ctx.stage(K)             the value of row-reduction stage K for the current row
// Trees are empty types with static KILN_HOST_DEVICE functions, so they run on both devices.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kiln/core/config.hpp"
#include "kiln/expr/node.hpp"

namespace kiln::lower {

template <int S>
struct LLoad {
  template <class T, class Ctx>
  KILN_HOST_DEVICE KILN_INLINE static T eval(const Ctx& ctx, index_t j) {
    return ctx.template load<S>(j);
  }
};

// A load of a rank-0 value: the same element at every position (hoisted out of the loop, and
// the kernel's other loads decide whether it is a unit-stride one).
template <int S>
struct LScalar {
  template <class T, class Ctx>
  KILN_HOST_DEVICE KILN_INLINE static T eval(const Ctx& ctx, index_t) {
    return ctx.template scalar<S>();
  }
};

// j itself: the position along the last axis (kiln::column_index, in a kernel of its own
// whose rows are never collapsed).
struct LIndex {
  template <class T, class Ctx>
  KILN_HOST_DEVICE KILN_INLINE static T eval(const Ctx&, index_t j) {
    return static_cast<T>(j);
  }
};

template <int C>
struct LConst {
  template <class T, class Ctx>
  KILN_HOST_DEVICE KILN_INLINE static T eval(const Ctx& ctx, index_t) {
    return ctx.constant(C);
  }
};

template <int K>
struct LStage {
  template <class T, class Ctx>
  KILN_HOST_DEVICE KILN_INLINE static T eval(const Ctx& ctx, index_t) {
    return ctx.stage(K);
  }
};

// A value that row stage S computed and kept for the row (ctx.cached(S, j)), when the context
// keeps row caches; else recomputed by Fallback.
template <int S, class Fallback>
struct LCached {
  template <class T, class Ctx>
  KILN_HOST_DEVICE KILN_INLINE static T eval(const Ctx& ctx, index_t j) {
    if constexpr (Ctx::row_cache) return ctx.cached(S, j);
    else return Fallback::template eval<T>(ctx, j);
  }
};

// The significant bits the context's results are stored with (Ctx::result_bits: a device
// kernel storing bf16 says 8), else T's own: the precision the maths may stop at (core/math.hpp).
template <class Ctx, class T>
constexpr int result_bits() {
  if constexpr (requires { Ctx::result_bits; }) return Ctx::result_bits;
  else return significand_bits<T>;
}

template <class Op, class... Args>
struct LOp {
  template <class T, class Ctx>
  KILN_HOST_DEVICE KILN_INLINE static T eval(const Ctx& ctx, index_t j) {
    return Op::template apply<T, result_bits<Ctx, T>()>(Args::template eval<T>(ctx, j)...);
  }
};

// The number of op nodes in a tree: the operations it does per element.
template <class Tree>
struct tree_ops {
  static constexpr int value = 0;
};
template <class Op, class... Args>
struct tree_ops<LOp<Op, Args...>> {
  static constexpr int value = 1 + (0 + ... + tree_ops<Args>::value);
};
template <int S, class F>
struct tree_ops<LCached<S, F>> {
  static constexpr int value = 0;
};

// The load slots a tree reads, as a bit mask (bit S: load slot S), in a context with row caches
// (Cached: an LCached reads the cache) or without (it recomputes its fallback). A kernel loads
// only these, so a stage that needs two of a kernel's four inputs reads two. Slots from 64 on
// (a kernel with that many inputs) set every bit.
template <class Tree, bool Cached>
struct tree_loads {
  static constexpr std::uint64_t value = 0;
};
template <int S, bool Cached>
struct tree_loads<LLoad<S>, Cached> {
  static constexpr std::uint64_t value = S < 64 ? std::uint64_t{1} << (S % 64) : ~std::uint64_t{0};
};
template <int S, bool Cached>
struct tree_loads<LScalar<S>, Cached> {
  static constexpr std::uint64_t value = S < 64 ? std::uint64_t{1} << (S % 64) : ~std::uint64_t{0};
};
template <int S, class F, bool Cached>
struct tree_loads<LCached<S, F>, Cached> {
  static constexpr std::uint64_t value = Cached ? 0 : tree_loads<F, Cached>::value;
};
template <class Op, class... Args, bool Cached>
struct tree_loads<LOp<Op, Args...>, Cached> {
  static constexpr std::uint64_t value = (std::uint64_t{0} | ... | tree_loads<Args, Cached>::value);
};

// One row-reduction stage: reduce Tree along the row with K. Cached: the stage also keeps
// Tree's values for the row, because later trees of the kernel read them (LCached).
template <ReduceKind K, class Tree, bool Cached>
struct Stage {
  static constexpr ReduceKind kind = K;
  static constexpr bool cached = Cached;
  using tree = Tree;
};

template <class... Ts>
struct TypeList {
  static constexpr int size = sizeof...(Ts);
};

// Load slots that read the same node: A[k] is the first slot that loads slot k's node (A[k] = k
// where none did before). A node read in two iteration spaces (a row kernel's output and one of
// its stages) has a slot per space; where the spaces have the same shape, at run time, the two
// slots hold the same values and a backend may read one for the other (remap_slots). Empty: no
// slot aliases another.
template <int... A>
struct SlotAlias {
  static constexpr int size = sizeof...(A);
  static constexpr int of(int k) {
    constexpr int a[] = {A..., 0};
    return k < size ? a[k] : k;
  }
};

// Tree with every load slot k replaced by Alias::of(k).
template <class Tree, class Alias>
struct remap_slots {
  using type = Tree;
};
template <int S, class Alias>
struct remap_slots<LLoad<S>, Alias> {
  using type = LLoad<Alias::of(S)>;
};
template <int S, class Alias>
struct remap_slots<LScalar<S>, Alias> {
  using type = LScalar<Alias::of(S)>;
};
template <int S, class F, class Alias>
struct remap_slots<LCached<S, F>, Alias> {
  using type = LCached<S, typename remap_slots<F, Alias>::type>;
};
template <class Op, class... Args, class Alias>
struct remap_slots<LOp<Op, Args...>, Alias> {
  using type = LOp<Op, typename remap_slots<Args, Alias>::type...>;
};
template <ReduceKind K, class Tree, bool Cached, class Alias>
struct remap_slots<Stage<K, Tree, Cached>, Alias> {
  using type = Stage<K, typename remap_slots<Tree, Alias>::type, Cached>;
};
template <class... Ts, class Alias>
struct remap_slots<TypeList<Ts...>, Alias> {
  using type = TypeList<typename remap_slots<Ts, Alias>::type...>;
};

// The kernel kinds, as descriptors a backend implements.
// Row: per row, the stages in order, then Out over the row (the pointwise kernel is the
// case with no stages). Alias: the slots that read the same node (SlotAlias). Extras (pointwise
// kernels only): trees of further outputs in Out's iteration space, stored beside it (the
// values of kernels merged into this one; the planner's multiple outputs).
template <class T, class Out, class Stages, int NLoads, int NConsts, class Alias = SlotAlias<>, class Extras = TypeList<>>
struct RowKernel {
  using value_type = T;
  using out_tree = Out;
  using stages = Stages;
  using alias = Alias;
  using extras = Extras;
  static constexpr int nloads = NLoads, nconsts = NConsts, nstages = Stages::size, nextra = Extras::size;
  static_assert(nextra == 0 || nstages == 0, "kiln: extra outputs are for pointwise kernels");
};
// Gemm: acc = A B into the accumulator buffer (load slot AccSlot), then Epi over each tile.
template <class T, class Epi, int AccSlot, int NLoads, int NConsts>
struct GemmKernel {
  using value_type = T;
  using epilogue = Epi;
  static constexpr int acc_slot = AccSlot;
  static constexpr bool has_epilogue = !std::is_same_v<Epi, LLoad<AccSlot>>;
  static constexpr int nloads = NLoads, nconsts = NConsts, nstages = 0;
};
// AxisReduce and TotalReduce: reduce Tree (the prologue) over one axis that is not the last,
// or over everything.
template <class T, ReduceKind K, class Tree, bool Total, int NLoads, int NConsts>
struct ReduceKernel {
  using value_type = T;
  using tree = Tree;
  static constexpr ReduceKind kind = K;
  static constexpr bool total = Total;
  static constexpr int nloads = NLoads, nconsts = NConsts, nstages = 0;
};

// An integer operand's type, for the kinds that read one through their own pointer (the
// executors bind it where the descriptor names an index_type); I = void: none.
template <class I>
struct IndexOperand {
  using index_type = I;
};
template <>
struct IndexOperand<void> {};

// AxisCopy: ranges along one axis of NSources sources copied into the output (the segments of
// lower/args.hpp's AxisCopyArgs; expr/ops/axis_copy.hpp's ops); no evaluator tree. I: the type
// of the run-time position the segments move with (write_slice), void where they are fixed.
template <class T, int NSources, class I = void>
struct AxisCopyKernel : IndexOperand<I> {
  using value_type = T;
  using position_type = I;
  static constexpr int nloads = NSources, nconsts = 0, nstages = 0;
};

// Convert: each element of the operand (load 0, read through its strides) converted from From
// to To (kiln::convert; kiln::cast). No evaluator tree. The loads are From; the output To.
template <class To, class From>
struct ConvertKernel {
  using value_type = From;
  using out_type = To;
  static constexpr int nloads = 1, nconsts = 0, nstages = 0;
};

// Dropout: each element of the operand (load 0, through its strides) kept and scaled, or zeroed,
// by a Philox mask drawn from the rng operand (i64 [2]: seed, offset). No evaluator tree.
template <class T>
struct DropoutKernel : IndexOperand<i64> {
  using value_type = T;
  static constexpr int nloads = 1, nconsts = 0, nstages = 0;
};

// IndexRows: rows of a table gathered by integer ids (embedding), or rows of src added into
// the rows the ids name (scatter_add_rows, Scatter); I is the ids' type. No evaluator tree.
template <class T, class I, bool Scatter>
struct IndexRowsKernel {
  using value_type = T;
  using index_type = I;
  static constexpr bool scatter = Scatter;
  static constexpr int nloads = 1, nconsts = 0, nstages = 0;
};

// Attention: one part of scaled dot-product attention (expr/ops/attention.hpp; Part is the
// AttentionPart's number), the causal mask or none, and kv_len's type I (void: none). Its loads
// are the node's float operands read for their values, in order; the slots below say which is
// which (-1: not read by this part).
template <class T, int Part, bool Causal, int NLoads, class I = void>
struct AttentionKernel : IndexOperand<I> {  // kv_len's integer type, read as index rows' ids are
  using value_type = T;
  using length_type = I;  // void: every key of k and v is valid
  static constexpr int part = Part, nloads = NLoads, nconsts = 0, nstages = 0;
  static constexpr bool causal = Causal;
  static constexpr AttentionPart part_kind = static_cast<AttentionPart>(Part);
  static constexpr bool grad_v = part_kind == AttentionPart::GradV;  // reads v for its shape only
  static constexpr int q_slot = 0, k_slot = 1, v_slot = grad_v ? -1 : 2;
  static constexpr int g_slot = part_kind == AttentionPart::Out ? -1 : grad_v ? 2 : 3;
  static constexpr int stats_slot = part_kind == AttentionPart::Out || part_kind == AttentionPart::Stats ? -1 : grad_v ? 3 : 4;
};

// ReduceTo: sum Tree (over the input's shape) down to the output's shape, which the input
// broadcasts from: the adjoint of broadcasting, as gradients need it.
template <class T, class Tree, int NLoads, int NConsts>
struct ReduceToKernel {
  using value_type = T;
  using tree = Tree;
  static constexpr int nloads = NLoads, nconsts = NConsts, nstages = 0;
};

}  // namespace kiln::lower
