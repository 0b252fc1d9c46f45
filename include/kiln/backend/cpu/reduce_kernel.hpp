// kiln: reductions that are not along the last axis, on the CPU. Fuses the pointwise
// prologue (recomputed from the inputs, never stored) with the reduction; writes only the
// reduced values.
// - AxisReduce: out[o, j] = reduce_k f(o, k, j) for an axis k before the last; each task owns
//   a slice of output columns and keeps its accumulators on the stack.
// - TotalReduce: everything to one value. Partial results per fixed-size chunk are combined
//   in chunk order, so the result does not depend on the number of threads.
#pragma once
#include <algorithm>
#include <vector>

#include "kiln/backend/cpu/row_kernel.hpp"

namespace kiln::cpu {

using lower::axis_base_row;

template <class Desc>
struct ReduceKernelCpu;

template <class T, ReduceKind K, class Tree, bool Total, int NL, int NC>
struct ReduceKernelCpu<lower::ReduceKernel<T, K, Tree, Total, NL, NC>> {
  using Args = lower::ReduceArgs<T, NL, NC>;  // the reduction's input space; `axis` a row dim
  using Op = Reduce<K, 0, false, false>;
  using C = compute_t<T>;  // accumulators and maths; T is the storage type
  static constexpr index_t kColumns = 256;   // AxisReduce: output columns per task
  static constexpr index_t kChunk = 1 << 14;  // TotalReduce: fewest elements per partial
  static constexpr index_t kMaxPartials = 512;  // TotalReduce: partials live on the stack

  static KILN_INLINE C combine(C a, C b) { return reduce_combine<K>(a, b); }

  // Not inlined: one compiled loop serves the serial and the threaded paths, so the summation
  // order, and so the result, is the same for any thread count.
  template <bool Unit>
  KILN_NOINLINE static C partial(const Args& a, index_t r, index_t j0, index_t j1) {
    RowContext<T, NL, NC, 0, Unit> ctx;
    ctx.inner = a.inner;
    ctx.consts = a.consts;
    set_row(ctx, a, r);
    for (int s = 0; s < NL; ++s) ctx.row_ptr[s] += j0 * a.inner[s];
    return reduce_values<K, C>(j1 - j0, [&](index_t j) { return Tree::template eval<C>(ctx, j); });
  }

  // Tasks are (row group, column chunk) pairs; the split depends only on the shape, never on
  // the thread count, and the partials are combined in task order.
  static void run_total(const Args& a) {
    const index_t per_row = std::clamp<index_t>((a.len + kChunk - 1) / kChunk, 1, kMaxPartials);
    const index_t chunk = (a.len + per_row - 1) / per_row;
    const index_t row_groups = std::clamp<index_t>(a.rows * a.len / kChunk, 1, std::max<index_t>(1, kMaxPartials / per_row));
    const index_t rows_per_group = (a.rows + row_groups - 1) / row_groups;
    C partials[kMaxPartials];
    const index_t tasks = row_groups * per_row;
    parallel_for(tasks, threads_for(a.rows * a.len, a.config), [&](index_t t) {
      const index_t g = t / per_row, j0 = (t % per_row) * chunk, j1 = std::min(a.len, j0 + chunk);
      C acc = Op::template identity<C>();
      for (index_t r = g * rows_per_group; r < std::min(a.rows, (g + 1) * rows_per_group); ++r)
        acc = combine(acc, a.unit_inner ? partial<true>(a, r, j0, j1) : partial<false>(a, r, j0, j1));
      partials[t] = acc;
    });
    C acc = Op::template identity<C>();
    for (index_t t = 0; t < tasks; ++t) acc = combine(acc, partials[t]);
    a.out[0] = narrow<T>(Op::template finish<C>(acc, a.rows * a.len));
  }

  template <bool Unit>
  static void axis_task(const Args& a, index_t out_row, index_t j0, index_t j1) {
    index_t axis_stride;
    const index_t base_row = axis_base_row(a, out_row, axis_stride);
    C acc[kColumns];
    const index_t n = j1 - j0;
    for (index_t j = 0; j < n; ++j) acc[j] = Op::template identity<C>();
    RowContext<T, NL, NC, 0, Unit> ctx;
    ctx.inner = a.inner;
    ctx.consts = a.consts;
    for (index_t k = 0; k < a.row_dims[a.axis]; ++k) {
      set_row(ctx, a, base_row + k * axis_stride);
      KILN_SIMD
      for (index_t j = 0; j < n; ++j) acc[j] = combine(acc[j], Tree::template eval<C>(ctx, j0 + j));
    }
    T* out = a.out + out_row * a.len + j0;
    for (index_t j = 0; j < n; ++j) out[j] = narrow<T>(Op::template finish<C>(acc[j], a.row_dims[a.axis]));
  }

  static void run_axis(const Args& a) {
    index_t out_rows = 1;  // every row dim but the reduced axis (which may be empty)
    for (int d = 0; d < a.nrow_dims; ++d)
      if (d != a.axis) out_rows *= a.row_dims[d];
    const index_t col_tasks = (a.len + kColumns - 1) / kColumns;
    if (a.row_dims[a.axis] == 0) {  // an empty axis: every output is the identity, finished
      for (index_t i = 0; i < out_rows * a.len; ++i) a.out[i] = narrow<T>(Op::template finish<C>(Op::template identity<C>(), 0));
      return;
    }
    parallel_for(out_rows * col_tasks, threads_for(a.rows * a.len, a.config), [&](index_t t) {
      const index_t r = t / col_tasks, j0 = (t % col_tasks) * kColumns, j1 = std::min(a.len, j0 + kColumns);
      if (a.unit_inner) axis_task<true>(a, r, j0, j1);
      else axis_task<false>(a, r, j0, j1);
    });
  }

  // MaxAutotune's candidates: one thread or all.
  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }

  static void run(const Args& a) {
    if constexpr (Total) run_total(a);
    else run_axis(a);
  }
};

}  // namespace kiln::cpu
