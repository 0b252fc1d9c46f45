// kiln: the pointwise kind on CUDA (a row kernel without stages), and the scalar batch (several
// one-value kernels in one launch).
#pragma once
#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/backend/cuda/row_context.cuh"

namespace kiln::cuda {

// Pointwise: units of W elements (W = 1: element loads; else 16-byte ones), U units per thread.
// A block covers U * blockDim consecutive units, thread t those at t + u * blockDim (a warp's
// loads of one u are consecutive), in a grid-stride loop; a thread issues all U units' loads
// before any maths, so a thread whose maths is long (a gelu-like chain: ~50 instructions per f32 value) still
// has U loads in flight, which memory speed needs (Little's law: ~20 KiB in flight per SM).
// One row with unit inner strides (any elementwise expression over same-shaped
// contiguous tensors) takes a path with no row arithmetic per unit: its loads read at the
// element index itself, and it is pipelined (below). A gelu-like chain issues an
// instruction on about 80% of cycles (ncu), so each one counts (docs/performance.md).
template <int NL>
inline constexpr int kPointwiseUnits = NL <= 2 ? 4 : NL <= 4 ? 2 : 1;

// The load slots a pointwise kernel reads (its output tree's and its extra outputs').
template <class Desc>
inline constexpr std::uint64_t pointwise_loads = []<class... E>(lower::TypeList<E...>) {
  return (lower::tree_loads<typename Desc::out_tree, false>::value | ... | lower::tree_loads<E, false>::value);
}(typename Desc::extras{});

// The flat case: one row, every load read with inner stride 1 (a rank-0 load's is 0: a
// broadcast), so element e of every load is at e.
template <class Desc, class Args>
bool pointwise_flat(const Args& a) {
  bool flat = a.rows == 1;
  for (int s = 0; s < Desc::nloads; ++s)
    if (loads_slot(pointwise_loads<Desc>, s)) flat = flat && a.inner[s] == 1;
  return flat;
}

// Flat: 0 the general kernel; 1 the flat case (the caller checked pointwise_flat), a kernel of
// its own so that its registers do not count against the general one's occupancy (in one
// kernel, a GEMM epilogue's gelu(acc + b) went from 80 to 86 registers, two blocks of 256 an SM instead of
// three, 21.4 -> 23.0 us); 2 the flat case over several rows where the loads in Laid are laid
// out as the output and the others are one row broadcast over the rows (a bias:
// pointwise_rows_flat). Those are read at the unit's column (which each thread carries from span
// to span by one addition) when the unit is computed, not a span ahead: they stay in L1, and
// registers hold only the laid-out loads in flight. Kernel 2 is launched for GEMM epilogues
// only (RowKernelCuda::run_epilogue), so other kernels do not instantiate it.
template <class Desc, int W, int Flat, class Args, std::uint64_t Laid = 0>
__global__ void pointwise_kernel(const Args a) {
  await_previous_kernel();
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int NL = Desc::nloads, U = kPointwiseUnits<NL>;
  constexpr std::uint64_t Mask = pointwise_loads<Desc>;
  const index_t nu = a.len / W, total = a.rows * nu;
  const index_t step = blockDim.x, span = step * U;  // a thread's units are step apart
  T consts[Desc::nconsts > 0 ? Desc::nconsts : 1];
#pragma unroll
  for (int c = 0; c < Desc::nconsts; ++c) consts[c] = a.consts[c];
  const index_t stride = span * gridDim.x;
  // Stores a unit at row r, unit ju, and the extra outputs (kernels merged into this one) from
  // the same registers: every load of the unit was issued first, so an output that overwrites
  // an input cannot change them.
  const auto store = [&](const raw_t<S, W>(&vu)[NL > 0 ? NL : 1], index_t r, index_t ju) {
    store_unit<typename Desc::out_tree, S, NL, W>(a.out + r * a.len, vu, consts, nullptr, NoRowCache{}, ju);
    if constexpr (Desc::nextra > 0) {
      [&]<class... E, int... I>(lower::TypeList<E...>, std::integer_sequence<int, I...>) {
        ((a.extra_out[I] ? store_unit<E, S, NL, W>(a.extra_out[I] + r * a.len, vu, consts, nullptr, NoRowCache{}, ju) : void()),
         ...);
      }(typename Desc::extras{}, std::make_integer_sequence<int, Desc::nextra>{});
    }
  };
  if constexpr (Flat > 0) {
    // The flat path, pipelined: a thread issues the loads of its next span before the maths of
    // this one, so loads stay in flight while it computes (run() launches the blocks an SM holds
    // at once, so most threads loop). A span's elements are read and written by one thread, so
    // an output that is also an input (in place) only meets loads of its own span, made earlier.
    // Flat 2: col[u] is unit u's column (e mod nu), advanced by stride mod nu a span.
    constexpr std::uint64_t Ahead = Flat == 2 ? (Mask & Laid) : Mask;  // loads issued a span ahead
    constexpr std::uint64_t AtUse = Flat == 2 ? (Mask & ~Laid) : 0;    // broadcast rows, read at use
    [[maybe_unused]] std::uint32_t col[U] = {}, advance = 0;
    const auto load_span = [&](index_t e0, raw_t<S, W>(&v)[U][NL > 0 ? NL : 1]) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const index_t e = e0 + u * step;
        if (e < total) load_unit<Ahead, NL, W, true>(v[u], a.ptr, a.inner, e * W);
      }
    };
    index_t e0 = static_cast<index_t>(blockIdx.x) * span + threadIdx.x;
    if (e0 >= total) return;
    if constexpr (Flat == 2) {
      advance = static_cast<std::uint32_t>(stride % nu);
#pragma unroll
      for (int u = 0; u < U; ++u) col[u] = static_cast<std::uint32_t>((e0 + u * step) % nu);
    }
    raw_t<S, W> v[U][NL > 0 ? NL : 1];
    load_span(e0, v);
    for (;;) {
      const index_t e1 = e0 + stride;
      raw_t<S, W> next[U][NL > 0 ? NL : 1];
      if (e1 < total) load_span(e1, next);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const index_t e = e0 + u * step;
        if (e >= total) break;
        if constexpr (AtUse != 0) load_unit<AtUse, NL, W, true>(v[u], a.ptr, a.inner, static_cast<index_t>(col[u]) * W);
        store(v[u], 0, e);
      }
      if (e1 >= total) return;
      e0 = e1;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int s = 0; s < (NL > 0 ? NL : 1); ++s)
          if (loads_slot(Ahead, s)) v[u][s] = next[u][s];
      if constexpr (Flat == 2) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          col[u] += advance;
          if (col[u] >= nu) col[u] -= static_cast<std::uint32_t>(nu);
        }
      }
    }
  } else {
    for (index_t e0 = static_cast<index_t>(blockIdx.x) * span + threadIdx.x; e0 < total; e0 += stride) {
      raw_t<S, W> v[U][NL > 0 ? NL : 1];
      index_t r[U], ju[U];
      // Unit e's row and column: one division a thread; the next units are `step` further, so
      // where a row is at least that long they carry at most one row. (A 64-bit division is
      // about 20 instructions when both values fit 32 bits, a call otherwise; it was per unit.)
      index_t row = a.rows == 1 ? 0 : e0 / nu, col = e0 - row * nu;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const index_t e = e0 + u * step;
        if (e >= total) break;
        if (u > 0) {
          if (nu >= step) {
            col += step;
            if (col >= nu) col -= nu, ++row;
          } else {
            row = e / nu;
            col = e - row * nu;
          }
        }
        r[u] = row;
        ju[u] = col;
        const S* p[NL > 0 ? NL : 1];
        lower::row_pointers(a, row, p);
        load_unit<Mask, NL, W>(v[u], p, a.inner, col * W);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (e0 + u * step >= total) break;
        store(v[u], r[u], ju[u]);
      }
    }
  }
}

// ScalarBatch (launch.hpp): one thread evaluates each descriptor's one value, in order.
template <class Desc, class Args>
__device__ __forceinline__ void eval_scalar(const Args& a) {
  using S = typename Desc::value_type;
  DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false> ctx;
  init_context(ctx, a);
  set_row(ctx, a, 0);
  a.out[0] = narrow<S>(Desc::out_tree::template eval<compute_t<S>>(ctx, 0));
}
template <class D, class... Rest, class Pack>
__device__ __forceinline__ void eval_scalars(const Pack& q) {
  eval_scalar<D>(q.head);
  if constexpr (sizeof...(Rest) > 0) eval_scalars<Rest...>(q.tail);
}
template <class Batch>
struct eval_batch;
template <class... Descs>
struct eval_batch<ScalarBatch<Descs...>> {
  template <class Pack>
  __device__ __forceinline__ static void run(const Pack& p) {
    eval_scalars<Descs...>(p);
  }
};
template <class Batch>
__global__ void scalar_batch_kernel(const launch_args_t<Batch> pack) {
  await_previous_kernel();
  if (threadIdx.x == 0) eval_batch<Batch>::run(pack);
}
template <class... Descs>
struct ScalarBatchCuda {
  using Args = ArgPack<launch_args_t<Descs>...>;
  static void run(const Args& a, const lower::LaunchConfig&, cudaStream_t stream, void* = nullptr) {
    launch_after_previous<&scalar_batch_kernel<ScalarBatch<Descs...>>>(1, 32, 0, stream, a);
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
