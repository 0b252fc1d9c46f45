// kiln: the argument vocabulary every backend speaks. For each kernel kind (lower/evaluator.hpp
// declares the descriptors), the run-time arguments the planner fills for one shape signature:
// pointers, extents, strides and scalars, in trivially copyable structs that hold no Eigen and
// no CUDA type. The CPU backend reads them in its loops; the CUDA backend passes them by value to
// its kernels. Each backend keeps its own workspaces (Eigen's packing buffers, cuBLASLt plans)
// beside them.
//
// Addressing of a row-shaped iteration space (rows x len, rows being the outer dims of space 0):
// load S at (row, j) reads ptr[S][sum_d row_index[d] * outer[S][d] + j * inner[S]]; broadcasting
// is a stride of 0. Stage spaces share the row index and have their own length.
#pragma once
#include <type_traits>

#include "kiln/core/config.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/lower/evaluator.hpp"

namespace kiln::lower {

// A kernel's launch configuration: what MaxAutotune chooses among. 0 means "the heuristic".
// The fields' meaning is the backend's: CPU threads, tasks per row and GEMM panel shapes; CUDA
// threads per block, load path and GEMM algorithm (each backend's candidates() say).
struct LaunchConfig {
  int threads = 0;          // CPU: threads (0: every thread, when the work is large enough); CUDA: threads per block
  int chunks = 0;           // CPU row kernels without stages: tasks per row; CUDA: the load path
  int variant = 0;          // CPU GEMM: 1 row panels, 2 column panels, 3 the GEMV loop; CUDA: layout or algorithm
  index_t panel_bytes = 0;  // CPU GEMM: the epilogue's panel size
  friend constexpr bool operator==(const LaunchConfig&, const LaunchConfig&) = default;
};

// Elements of a stage input a row cache holds. The planner sets RowArgs::row_cache for rows up
// to this length; a backend may cache less (CUDA checks its shared memory).
inline constexpr index_t kRowCache = 4096;

// Row and pointwise kernels (RowKernel). T is the storage type of every load and of the
// output; the maths runs in compute_t<T> (float for bf16 and f16: loads widen, the store rounds).
template <class T, int NL, int NC, int NS>
struct RowArgs {
  const T* ptr[NL > 0 ? NL : 1] = {};
  index_t outer[NL > 0 ? NL : 1][kMaxRank] = {};
  index_t inner[NL > 0 ? NL : 1] = {};
  compute_t<T> consts[NC > 0 ? NC : 1] = {};
  index_t stage_len[NS > 0 ? NS : 1] = {};
  int nrow_dims = 0;
  index_t row_dims[kMaxRank] = {};
  index_t rows = 1;  // product of row_dims
  index_t len = 1;   // extent of the last axis of space 0
  T* out = nullptr;  // contiguous rows x len
  bool unit_inner = false;  // every load has inner stride 1: the SIMD-friendly case
  bool row_cache = false;   // every space has the output's shape and a row fits kRowCache
  LaunchConfig config;
};

// A pointwise kernel that also writes the values of kernels merged into it (RowKernel's
// Extras): extra_out[e] is laid out as out (contiguous rows x len), or null where that kernel
// runs on its own for these shapes.
template <class T, int NL, int NC, int NS, int NE>
struct RowArgsOut : RowArgs<T, NL, NC, NS> {
  T* extra_out[NE > 0 ? NE : 1] = {};
};
template <class T, int NL, int NC, int NS, int NE>
using row_args_t = std::conditional_t<NE == 0, RowArgs<T, NL, NC, NS>, RowArgsOut<T, NL, NC, NS, NE>>;

// Points ptr[s] at row `row` of load s (row-major over a.row_dims). One definition for every
// kernel on both devices.
template <class T, int NL, int NC, int NS, class Ptr>
KILN_HOST_DEVICE KILN_INLINE void row_pointers(const RowArgs<T, NL, NC, NS>& a, index_t row, Ptr* ptr) {
  if (a.nrow_dims == 1) {  // the common case after dimension collapsing: no divisions
    for (int s = 0; s < NL; ++s) ptr[s] = a.ptr[s] + row * a.outer[s][0];
    return;
  }
  index_t off[NL > 0 ? NL : 1] = {};
  for (int d = a.nrow_dims - 1; d >= 0; --d) {
    const index_t i = row % a.row_dims[d];
    row /= a.row_dims[d];
    for (int s = 0; s < NL; ++s) off[s] += i * a.outer[s][d];
  }
  for (int s = 0; s < NL; ++s) ptr[s] = a.ptr[s] + off[s];
}

// AxisReduce and TotalReduce (ReduceKernel): rows and loads are those of the reduction's input
// space; `axis` is the reduced row dim (AxisReduce).
template <class T, int NL, int NC>
struct ReduceArgs : RowArgs<T, NL, NC, 0> {
  int axis = 0;
};

// AxisReduce: the input row that element 0 along `axis` of output row out_row reads (the row
// dims of the input with `axis` removed index the output rows); element k is that row plus
// k * axis_stride.
template <class Args>
KILN_HOST_DEVICE KILN_INLINE index_t axis_base_row(const Args& a, index_t out_row, index_t& axis_stride) {
  index_t rest = out_row, base_row = 0, row_stride = 1;
  for (int d = a.nrow_dims - 1; d >= 0; --d) {
    if (d != a.axis) {
      const index_t i = rest % a.row_dims[d];
      rest /= a.row_dims[d];
      base_row += i * row_stride;
    }
    row_stride *= a.row_dims[d];
  }
  axis_stride = 1;
  for (int d = a.axis + 1; d < a.nrow_dims; ++d) axis_stride *= a.row_dims[d];
  return base_row;
}

// ReduceTo (sum down to a shape): iterates over the input's rows; each input element adds into
// the output element it broadcast from.
template <class T, int NL, int NC>
struct ReduceToArgs : RowArgs<T, NL, NC, 0> {
  index_t out_outer[kMaxRank] = {};  // the output's stride along each row dim of the input
  index_t out_inner = 0;             // ... and along its last axis (0: summed)
  index_t out_numel = 0;
};

// AxisCopy (AxisCopyKernel): the output's rows as in RowArgs, load s being source s read
// through its own strides (outer[s][d] along row dim d, inner[s] along the last axis). Segment k
// copies positions [src_begin, src_begin + len) of load seg_load[k] along `axis` to [dst_begin,
// dst_begin + len) of the output; the segments are in output order and do not overlap; positions
// no segment covers are 0.
// A run-time position (I, the *At forms: write_slice and its derivatives): each of a segment's
// three numbers also moves by p times its shift (-1, 0 or 1), p being the integer at ids, read
// where the kernel runs and clamped to [0, max_position] (the CPU checks it before the call).
// window_only (a write_slice assigned to its own x, in place): the output is x's tensor, of which
// only the window is written. The iteration space is then src's (rows x len), read through load
// 1, and element (row index idx, j) goes to out[sum_d idx[d] out_outer[d] + j out_inner +
// p out_axis_stride].
inline constexpr int kMaxSegments = kMaxAxisCopySegments;

template <class I>
struct AxisCopyPosition {
  const I* ids = nullptr;
  index_t max_position = 0;
  KILN_HOST_DEVICE KILN_INLINE index_t position() const {
    const auto p = static_cast<index_t>(*ids);
    return p < 0 ? 0 : (p > max_position ? max_position : p);
  }
};
template <>
struct AxisCopyPosition<void> {
  KILN_HOST_DEVICE KILN_INLINE static constexpr index_t position() { return 0; }
};

template <class T, int NS, class I = void>
struct AxisCopyArgs : RowArgs<T, NS, 0, 0>, AxisCopyPosition<I> {
  int axis = 0;  // a row dim, or nrow_dims for the last axis
  int nsegments = 0;
  int seg_load[kMaxSegments] = {};
  index_t src_begin[kMaxSegments] = {}, dst_begin[kMaxSegments] = {}, seg_len[kMaxSegments] = {};
  signed char src_shift[kMaxSegments] = {}, dst_shift[kMaxSegments] = {}, len_shift[kMaxSegments] = {};
  bool window_only = false;
  index_t out_outer[kMaxRank] = {}, out_inner = 1, out_axis_stride = 0;
  const char* op = "";  // the op's name, for the host's errors

  struct Segment {
    int load;
    index_t src_begin, dst_begin, len;
  };
  // Segment k at position p.
  KILN_HOST_DEVICE KILN_INLINE Segment segment(int k, index_t p) const {
    return {seg_load[k], src_begin[k] + src_shift[k] * p, dst_begin[k] + dst_shift[k] * p, seg_len[k] + len_shift[k] * p};
  }
  // The segment covering output position q along the axis at position p, or -1.
  KILN_HOST_DEVICE KILN_INLINE int segment_of(index_t q, index_t p) const {
    for (int k = 0; k < nsegments; ++k) {
      const Segment s = segment(k, p);
      if (q >= s.dst_begin && q < s.dst_begin + s.len) return k;
    }
    return -1;
  }
};

// Convert (ConvertKernel): rows and load 0 as in RowArgs (the operand, in From); the output `to`
// is contiguous rows x len in To (RowArgs::out is unused).
template <class To, class From>
struct ConvertArgs : RowArgs<From, 1, 0, 0> {
  To* to = nullptr;
};

// Dropout (DropoutKernel): rows and load 0 as in RowArgs; the output contiguous rows x len. Element
// e = row * len + j (the output's row-major index) is x's times `scale` where
// philox::uniform(seed, offset, stream, e) >= p, else 0; ids points at (seed, offset).
template <class T>
struct DropoutArgs : RowArgs<T, 1, 0, 0> {
  const i64* ids = nullptr;
  float p = 0;
  compute_t<T> scale = 1;  // 1 / (1 - p)
  std::uint32_t stream = 0;
};

// IndexRows (IndexRowsKernel): the iteration space is the ids' positions (rows, one per id,
// in the ids' row-major order; the ids are contiguous) by the row length len. Load 0 is the
// float operand:
// - gather (embedding): the table; row r of the output (contiguous rows x len) is table row
//   ids[r], element j at ptr[0][ids[r] * table_row_stride + j * inner[0]];
// - scatter (scatter_add_rows): src, through its strides over the rows (outer[0]) as in RowArgs;
//   the output is table_rows x len, contiguous, and row v is the sum of the src rows r with
//   ids[r] = v, in increasing r.
// An id outside [0, table_rows) is checked on the host where the ids are (check_ids).
template <class T, class I>
struct IndexRowsArgs : RowArgs<T, 1, 0, 0> {
  const I* ids = nullptr;
  index_t table_rows = 0;
  index_t table_row_stride = 0;  // gather: the table's stride along its first axis
};

// The first position r whose id is outside [0, rows), or -1.
template <class I>
index_t first_id_out_of_range(const I* ids, index_t n, index_t rows) {
  for (index_t r = 0; r < n; ++r)
    if (ids[r] < 0 || static_cast<index_t>(ids[r]) >= rows) return r;
  return -1;
}

// Attention (AttentionKernel): load s's element (b, h, i, d) is at ptr[s][b * outer[s][0] +
// h * outer[s][1] + i * outer[s][2] + d * inner[s]], strides being 0 along broadcast axes; the
// descriptor names the slots (q, k, v, the cotangent g, the stats [.., 2]: lse then delta, in
// compute_t<T>; T is q's type).
// Query head h reads key/value head h / (heads / kv_heads). The output is contiguous, [batch,
// heads, q_len, v_dim] (Out, GradQ: head_dim), [batch, heads, q_len, 2] (Stats) or [batch,
// kv_heads, kv_len, head_dim or v_dim] (GradK, GradV).
// Batch b's visible keys are a window [first_key(b), length(b)) of the kv_len positions; under
// the causal mask query i also sees only keys j <= i + length(b) - q_len, so the visible keys of
// query i are [first_key(b), keys_seen(b, i)).
template <class I>
struct AttentionLengths {  // the window operand: batch b's end at ids[b * ids_stride + end_offset],
                           // and with `windows` its first key at ids[b * ids_stride]
  const I* ids = nullptr;
  index_t ids_stride = 0, end_offset = 0;
  bool windows = false;  // [B, 2] (first key, end) rather than lengths ([] or [B])
};
template <>
struct AttentionLengths<void> {};

template <class T, int NL, class I = void>
struct AttentionArgs : RowArgs<T, NL, 0, 0>, AttentionLengths<I> {
  index_t batch = 0, heads = 0, kv_heads = 0, q_len = 0, kv_len = 0, head_dim = 0, v_dim = 0;
  compute_t<T> scale = 1;
  // The end of batch b's window: kv_len, or the operand's end clamped to [0, kv_len] where
  // there is one (read where the kernel runs: on the device for CUDA).
  KILN_HOST_DEVICE KILN_INLINE index_t length(index_t b) const {
    if constexpr (std::is_void_v<I>) {
      return kv_len;
    } else {
      const auto n = static_cast<index_t>(this->ids[b * this->ids_stride + this->end_offset]);
      return n < 0 ? 0 : (n > kv_len ? kv_len : n);
    }
  }
  // The first key batch b sees: 0, or the operand's first key clamped to [0, length(b)].
  KILN_HOST_DEVICE KILN_INLINE index_t first_key(index_t b) const {
    if constexpr (std::is_void_v<I>) {
      return 0;
    } else {
      if (!this->windows) return 0;
      const auto n = static_cast<index_t>(this->ids[b * this->ids_stride]), len = length(b);
      return n < 0 ? 0 : (n > len ? len : n);
    }
  }
  // The last key query i of batch b sees, plus one: its length L, or i + 1 + L - q_len under
  // the mask (at least 0). Without b: every key valid (the planner's counts).
  KILN_HOST_DEVICE KILN_INLINE static index_t keys_seen(index_t i, bool causal, index_t len, index_t q_len) {
    if (!causal) return len;
    const index_t e = i + 1 + len - q_len;
    return e < 0 ? 0 : (e > len ? len : e);
  }
  KILN_HOST_DEVICE KILN_INLINE index_t keys_seen(index_t b, index_t i, bool causal) const {
    return keys_seen(i, causal, length(b), q_len);
  }
  KILN_HOST_DEVICE KILN_INLINE index_t keys_seen_full(index_t i, bool causal) const { return keys_seen(i, causal, kv_len, q_len); }
  // Whether query i of batch b sees key j.
  KILN_HOST_DEVICE KILN_INLINE bool visible(index_t b, index_t i, index_t j, bool causal) const {
    return j >= first_key(b) && j < keys_seen(b, i, causal);
  }
  // The first query of batch b that sees key j, or a query before it (q_len where none does).
  KILN_HOST_DEVICE KILN_INLINE index_t first_query(index_t b, index_t j, bool causal) const {
    const index_t len = length(b);
    if (j >= len) return q_len;
    if (!causal) return 0;
    const index_t i = j - (len - q_len);
    return i < 0 ? 0 : (i > q_len ? q_len : i);
  }
  template <int S>
  KILN_HOST_DEVICE KILN_INLINE const T* at(index_t b, index_t h, index_t i) const {
    return this->ptr[S] + b * this->outer[S][0] + h * this->outer[S][1] + i * this->outer[S][2];
  }
  // The statistics are compute_t<T> (float for 16-bit types, so lse keeps its precision): the
  // Stats part writes them through stats_out, the gradients read them through stats_at.
  template <int S>
  KILN_HOST_DEVICE KILN_INLINE const compute_t<T>* stats_at(index_t b, index_t h, index_t i) const {
    return reinterpret_cast<const compute_t<T>*>(this->ptr[S]) + b * this->outer[S][0] + h * this->outer[S][1] +
           i * this->outer[S][2];
  }
  KILN_HOST_DEVICE KILN_INLINE compute_t<T>* stats_out(index_t b, index_t h, index_t i) const {
    return reinterpret_cast<compute_t<T>*>(this->out) + ((b * heads + h) * q_len + i) * 2;
  }
};

// One GEMM operand, as a batch of matrices: element (b, i, j) at ptr[b*batch + i*row + j*col].
template <class T>
struct MatrixView {
  const T* ptr = nullptr;
  index_t batch = 0, row = 0, col = 1;
};

// GEMM + epilogue (GemmKernel): acc = A B, then the epilogue, a row kernel over the output
// whose load slot acc_slot reads acc.
template <class T, int NL, int NC>
struct GemmArgs {
  RowArgs<T, NL, NC, 0> epilogue;  // over the output; its acc slot points at `acc`
  MatrixView<T> a, b;
  T* acc = nullptr;                // batch x M x N, contiguous
  index_t batch = 1, m = 0, n = 0, k = 0;
  bool in_place = true;  // acc is the output and the epilogue's rows are acc's rows
  LaunchConfig config;
};

// The argument struct of each kernel descriptor.
template <class Desc>
struct kernel_args;
template <class T, class O, class S, int NL, int NC, class A, class E>
struct kernel_args<RowKernel<T, O, S, NL, NC, A, E>> {
  using type = row_args_t<T, NL, NC, S::size, E::size>;
};
template <class T, ReduceKind K, class Tr, bool Tot, int NL, int NC>
struct kernel_args<ReduceKernel<T, K, Tr, Tot, NL, NC>> {
  using type = ReduceArgs<T, NL, NC>;
};
template <class T, class Tr, int NL, int NC>
struct kernel_args<ReduceToKernel<T, Tr, NL, NC>> {
  using type = ReduceToArgs<T, NL, NC>;
};
template <class T, class E, int A, int NL, int NC>
struct kernel_args<GemmKernel<T, E, A, NL, NC>> {
  using type = GemmArgs<T, NL, NC>;
};
template <class T, int NS, class I>
struct kernel_args<AxisCopyKernel<T, NS, I>> {
  using type = AxisCopyArgs<T, NS, I>;
};
template <class T>
struct kernel_args<DropoutKernel<T>> {
  using type = DropoutArgs<T>;
};
template <class To, class From>
struct kernel_args<ConvertKernel<To, From>> {
  using type = ConvertArgs<To, From>;
};
template <class T, class I, bool S>
struct kernel_args<IndexRowsKernel<T, I, S>> {
  using type = IndexRowsArgs<T, I>;
};
template <class T, int P, bool C, int NL, class I>
struct kernel_args<AttentionKernel<T, P, C, NL, I>> {
  using type = AttentionArgs<T, NL, I>;
};
template <class Desc>
using args_t = typename kernel_args<Desc>::type;

// The row-shaped part of any kind's arguments (a GEMM's: its epilogue's), which the planner
// fills the same way for every kind.
template <class Args>
auto& row_part(Args& a) {
  if constexpr (requires { a.epilogue; }) return a.epilogue;
  else return a;
}

}  // namespace kiln::lower
