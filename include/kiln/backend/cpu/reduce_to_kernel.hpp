// kiln: sum down to a shape on the CPU, the adjoint of broadcasting (the gradient of a bias,
// of any broadcast operand). Fuses the pointwise prologue, recomputed from the inputs; writes
// only the reduced value. Iterates over the input's rows; each input element adds into the
// output element it broadcast from (output strides are 0 along the summed axes).
// - The last axis kept: tasks own column ranges of the output and walk every row, so no two
//   tasks write one element; the inner loop is SIMD.
// - The last axis summed: each row's sum (a SIMD reduction) is added in row order, serially.
#pragma once
#include <algorithm>
#include <vector>

#include "kiln/backend/cpu/row_kernel.hpp"

namespace kiln::cpu {

template <class Desc>
struct ReduceToKernelCpu;

template <class T, class Tree, int NL, int NC>
struct ReduceToKernelCpu<lower::ReduceToKernel<T, Tree, NL, NC>> {
  using Args = lower::ReduceToArgs<T, NL, NC>;
  static constexpr index_t kColumns = 256;

  static index_t out_offset(const Args& a, index_t row) {
    index_t off = 0;
    for (int d = a.nrow_dims - 1; d >= 0; --d) {
      off += (row % a.row_dims[d]) * a.out_outer[d];
      row /= a.row_dims[d];
    }
    return off;
  }

  using C = compute_t<T>;  // the sums; T is the storage type

  // Sums into acc, laid out as the output (the output itself when T computes in itself).
  template <bool Unit>
  static void columns(const Args& a, C* acc, index_t j0, index_t j1) {
    RowContext<T, NL, NC, 0, Unit> ctx;
    ctx.inner = a.inner;
    ctx.consts = a.consts;
    for (index_t r = 0; r < a.rows; ++r) {
      set_row(ctx, a, r);
      C* __restrict o = acc + out_offset(a, r);
      KILN_SIMD
      for (index_t j = j0; j < j1; ++j) o[j] += Tree::template eval<C>(ctx, j);
    }
  }

  template <bool Unit>
  static void rows(const Args& a, C* acc) {
    RowContext<T, NL, NC, 0, Unit> ctx;
    ctx.inner = a.inner;
    ctx.consts = a.consts;
    for (index_t r = 0; r < a.rows; ++r) {
      set_row(ctx, a, r);
      acc[out_offset(a, r)] += reduce_span<ReduceKind::Sum, C, Tree>(ctx, a.len);
    }
  }

  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }

  // A 16-bit output is summed in float apart (out_numel sums) and rounded once at the end; the
  // float sums are reserved by prepare, before any kernel of a call, so run allocates nothing.
  // Grows only: a failed growth leaves it as it was.
  struct Workspace {
    std::vector<C> wide;
  };
  static void prepare(const Args& a, Workspace& ws) {
    if constexpr (!std::is_same_v<T, C>)
      if (static_cast<index_t>(ws.wide.size()) < a.out_numel) ws.wide.resize(static_cast<std::size_t>(a.out_numel));
  }

  static void run(const Args& a, Workspace& ws) {
    C* acc;
    if constexpr (std::is_same_v<T, C>) acc = a.out;
    else acc = ws.wide.data();
    std::fill_n(acc, a.out_numel, C(0));
    if (a.out_inner != 0) {
      const index_t tasks = (a.len + kColumns - 1) / kColumns;
      parallel_for(tasks, threads_for(a.rows * a.len, a.config), [&](index_t t) {
        const index_t j0 = t * kColumns, j1 = std::min(a.len, j0 + kColumns);
        if (a.unit_inner) columns<true>(a, acc, j0, j1);
        else columns<false>(a, acc, j0, j1);
      });
    } else if (a.unit_inner) {
      rows<true>(a, acc);
    } else {
      rows<false>(a, acc);
    }
    if constexpr (!std::is_same_v<T, C>)
      for (index_t i = 0; i < a.out_numel; ++i) a.out[i] = narrow<T>(acc[i]);
  }
};

}  // namespace kiln::cpu
