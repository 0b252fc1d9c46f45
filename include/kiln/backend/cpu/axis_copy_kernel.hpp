// kiln: the axis-copy kind on the CPU (concat, slice, write_slice and their derivatives;
// lower/args.hpp's AxisCopyArgs). Rows of the output are spread over threads. Where the axis is
// a row dim, a whole row comes from one source's row (or is 0); where it is the last axis, each
// segment fills its part of the row. Each run is a strided copy, a SIMD loop where the source's
// stride along the row is 1. A write_slice in place (window_only) walks src's rows instead and
// writes each into its place in the output.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cpu {

template <class Desc>
struct AxisCopyKernelCpu;

template <class T, int NS, class I>
struct AxisCopyKernelCpu<lower::AxisCopyKernel<T, NS, I>> {
  using Args = lower::AxisCopyArgs<T, NS, I>;

  // A run-time position outside [0, max_position] would place the window past the axis: an
  // IndexError before the call's first kernel (CUDA clamps it where it is read).
  static void check_ids(const Args& a)
    requires(!std::is_void_v<I>)
  {
    const auto p = static_cast<long long>(*a.ids);
    if (p < 0 || p > a.max_position)
      throw IndexError(std::string(a.op) + ": position " + std::to_string(p) + " along axis " + std::to_string(a.axis) +
                       " places the window past the axis; positions 0 to " + std::to_string(a.max_position) + " fit");
  }

  // n values from src (stride `stride`) to dst (stride `dst_stride`).
  static KILN_INLINE void copy_run(T* __restrict dst, index_t dst_stride, const T* __restrict src, index_t stride, index_t n) {
    if (stride == 1 && dst_stride == 1) {
      KILN_SIMD
      for (index_t j = 0; j < n; ++j) dst[j] = src[j];
    } else {
      for (index_t j = 0; j < n; ++j) dst[j * dst_stride] = src[j * stride];
    }
  }

  static void row(const Args& a, index_t r, index_t p) {
    index_t idx[kMaxRank] = {};
    for (index_t d = a.nrow_dims - 1, rest = r; d >= 0; --d) {
      idx[d] = rest % a.row_dims[d];
      rest /= a.row_dims[d];
    }
    // Load s's element at the row's index, its position along the axis being q.
    auto source_row = [&](int s, index_t q) {
      const T* src = a.ptr[s];
      for (int d = 0; d < a.nrow_dims; ++d) src += (d == a.axis ? q : idx[d]) * a.outer[s][d];
      return src;
    };
    constexpr int src = NS >= 2 ? 1 : 0;  // write_slice's src (window_only has two sources)
    if (a.window_only) {  // src's row r to its place in the output, p positions along the axis
      T* out = a.out + p * a.out_axis_stride;
      for (int d = 0; d < a.nrow_dims; ++d) out += idx[d] * a.out_outer[d];
      copy_run(out, a.out_inner, source_row(src, a.axis < a.nrow_dims ? idx[a.axis] : 0), a.inner[src], a.len);
      return;
    }
    T* out = a.out + r * a.len;
    if (a.axis < a.nrow_dims) {  // the row is one source's row, or zeros
      const index_t q = idx[a.axis];
      const int k = a.segment_of(q, p);
      if (k < 0) {
        std::fill_n(out, a.len, T(0));
        return;
      }
      const auto seg = a.segment(k, p);
      copy_run(out, 1, source_row(seg.load, q - seg.dst_begin + seg.src_begin), a.inner[seg.load], a.len);
      return;
    }
    index_t covered = 0;  // the segments of a row are in order and do not overlap
    for (int k = 0; k < a.nsegments; ++k) {
      const auto seg = a.segment(k, p);
      if (seg.len <= 0) continue;
      std::fill(out + covered, out + seg.dst_begin, T(0));
      copy_run(out + seg.dst_begin, 1, source_row(seg.load, 0) + seg.src_begin * a.inner[seg.load], a.inner[seg.load], seg.len);
      covered = seg.dst_begin + seg.len;
    }
    std::fill(out + std::min(covered, a.len), out + a.len, T(0));
  }

  static void run(const Args& a) {
    const index_t p = a.position();
    parallel_for(a.rows, threads_for(a.rows * a.len, a.config), [&](index_t r) { row(a, r, p); });
  }

  // MaxAutotune's candidates: one thread or all.
  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }
};

}  // namespace kiln::cpu
