// kiln: the index-rows kind on the CPU (embedding and scatter_add_rows; lower/args.hpp's
// IndexRowsArgs).
// - Gather: one table row copied per id, the ids' positions spread over threads.
// - Scatter: each task owns a range of output rows. It zeroes them, then walks every id in
//   order and adds the src rows whose id falls in its range. So each output row is summed by
//   one task in increasing position whatever the thread count: the result is deterministic. A
//   16-bit output is summed in float (a workspace reserved by prepare) and rounded once.
// The ids were checked against the table before the call's first kernel (check_ids).
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cpu {

template <class Desc>
struct IndexRowsKernelCpu;

template <class T, class I, bool Scatter>
struct IndexRowsKernelCpu<lower::IndexRowsKernel<T, I, Scatter>> {
  using Args = lower::IndexRowsArgs<T, I>;
  using C = compute_t<T>;
  static constexpr const char* op = Scatter ? "scatter_add_rows" : "embedding";

  // An IndexError naming the first id outside [0, table_rows) and its position.
  static void check_ids(const Args& a) {
    const index_t r = lower::first_id_out_of_range(a.ids, a.rows, a.table_rows);
    if (r < 0) return;
    throw IndexError(std::string(op) + ": id " + std::to_string(static_cast<long long>(a.ids[r])) + " at position " +
                     std::to_string(r) + " is not a row of the table, which has " + std::to_string(a.table_rows) +
                     " rows of " + std::to_string(a.len));
  }

  struct Workspace {  // a 16-bit scatter's float sums; grows only
    std::vector<C> wide;
  };
  static void prepare(const Args& a, Workspace& ws) {
    if constexpr (Scatter && !std::is_same_v<T, C>) {
      const auto n = static_cast<std::size_t>(a.table_rows * a.len);
      if (ws.wide.size() < n) ws.wide.resize(n);
    }
  }

  static void gather(const Args& a) {
    parallel_for(a.rows, threads_for(a.rows * a.len, a.config), [&](index_t r) {
      const T* __restrict src = a.ptr[0] + static_cast<index_t>(a.ids[r]) * a.table_row_stride;
      T* __restrict out = a.out + r * a.len;
      if (a.inner[0] == 1) {
        KILN_SIMD
        for (index_t j = 0; j < a.len; ++j) out[j] = src[j];
      } else {
        for (index_t j = 0; j < a.len; ++j) out[j] = src[j * a.inner[0]];
      }
    });
  }

  static void scatter(const Args& a, Workspace& ws) {
    C* acc;
    if constexpr (std::is_same_v<T, C>) acc = a.out;
    else acc = ws.wide.data();
    const index_t rows = a.table_rows, len = a.len;
    const int threads = threads_for(std::max(rows, a.rows) * len, a.config);
    const index_t tasks = std::min<index_t>(threads, std::max<index_t>(rows, 1));
    parallel_for(tasks, threads, [&](index_t t) {
      const index_t v0 = rows * t / tasks, v1 = rows * (t + 1) / tasks;
      std::fill(acc + v0 * len, acc + v1 * len, C(0));
      for (index_t r = 0; r < a.rows; ++r) {
        const auto v = static_cast<index_t>(a.ids[r]);
        if (v < v0 || v >= v1) continue;
        const T* src[1];
        lower::row_pointers(a, r, src);
        const T* __restrict s = src[0];
        C* __restrict o = acc + v * len;
        if (a.inner[0] == 1) {
          KILN_SIMD
          for (index_t j = 0; j < len; ++j) o[j] += widen(s[j]);
        } else {
          for (index_t j = 0; j < len; ++j) o[j] += widen(s[j * a.inner[0]]);
        }
      }
      if constexpr (!std::is_same_v<T, C>)
        for (index_t i = v0 * len; i < v1 * len; ++i) a.out[i] = narrow<T>(acc[i]);
    });
  }

  static void run(const Args& a, Workspace& ws) {
    if constexpr (Scatter) scatter(a, ws);
    else gather(a);
  }

  // MaxAutotune's candidates: one thread or all.
  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }
};

}  // namespace kiln::cpu
