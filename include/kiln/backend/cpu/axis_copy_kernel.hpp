// kiln: the axis-copy kind on the CPU (concat, slice, and their derivatives extract and insert;
// lower/args.hpp's AxisCopyArgs). Rows of the output are spread over threads. Where the axis is
// a row dim, a whole row comes from one source's row (or is 0); where it is the last axis, each
// segment fills its part of the row. Each run is a strided copy, a SIMD loop where the source's
// stride along the row is 1.
#pragma once
#include <algorithm>
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cpu {

template <class Desc>
struct AxisCopyKernelCpu;

template <class T, int NS>
struct AxisCopyKernelCpu<lower::AxisCopyKernel<T, NS>> {
  using Args = lower::AxisCopyArgs<T, NS>;

  // n values from src (stride `stride`) to dst (contiguous).
  static KILN_INLINE void copy_run(T* __restrict dst, const T* __restrict src, index_t stride, index_t n) {
    if (stride == 1) {
      KILN_SIMD
      for (index_t j = 0; j < n; ++j) dst[j] = src[j];
    } else {
      for (index_t j = 0; j < n; ++j) dst[j] = src[j * stride];
    }
  }

  static void row(const Args& a, index_t r) {
    index_t idx[kMaxRank] = {};
    for (index_t d = a.nrow_dims - 1, rest = r; d >= 0; --d) {
      idx[d] = rest % a.row_dims[d];
      rest /= a.row_dims[d];
    }
    T* out = a.out + r * a.len;
    // Source s's element at the row's index, its position along the axis being p.
    auto source_row = [&](int s, index_t p) {
      const T* src = a.ptr[s];
      for (int d = 0; d < a.nrow_dims; ++d) src += (d == a.axis ? p : idx[d]) * a.outer[s][d];
      return src;
    };
    if (a.axis < a.nrow_dims) {  // the row is one source's row, or zeros
      const index_t p = idx[a.axis];
      const int s = a.segment_of(p);
      if (s < 0) std::fill_n(out, a.len, T(0));
      else copy_run(out, source_row(s, p - a.dst_begin[s] + a.src_begin[s]), a.inner[s], a.len);
      return;
    }
    index_t covered = 0;  // the segments of a row are in order and do not overlap
    for (int s = 0; s < NS; ++s) {
      if (a.seg_len[s] == 0) continue;
      std::fill(out + covered, out + a.dst_begin[s], T(0));
      copy_run(out + a.dst_begin[s], source_row(s, 0) + a.src_begin[s] * a.inner[s], a.inner[s], a.seg_len[s]);
      covered = a.dst_begin[s] + a.seg_len[s];
    }
    std::fill(out + std::min(covered, a.len), out + a.len, T(0));
  }

  static void run(const Args& a) {
    parallel_for(a.rows, threads_for(a.rows * a.len, a.config), [&](index_t r) { row(a, r); });
  }

  // MaxAutotune's candidates: one thread or all.
  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }
};

}  // namespace kiln::cpu
