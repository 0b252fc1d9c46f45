// kiln: the axis-copy kind on CUDA (concat, slice, write_slice and their derivatives;
// lower/args.hpp's AxisCopyArgs). Each output element finds its position along the axis, the
// segment covering it (or writes 0), and reads that source through its strides. Consecutive
// threads write consecutive elements; a source whose last stride is 1 is read coalesced too. A
// long row made of whole runs of unit-stride sources is copied run by run in 16-byte vectors. A
// run-time position is read by every thread (one cached load) and clamped to the axis. A
// write_slice in place (window_only) walks src's elements instead and writes each into its place
// in the output.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

// Element j of row `row` (row-major over the row dims, idx its index there).
template <int NS, class T, class Args>
__device__ KILN_INLINE void axis_copy_element(const Args& a, index_t p, index_t row, const index_t* idx, index_t j) {
  constexpr int src_load = NS >= 2 ? 1 : 0;  // write_slice's src (window_only has two sources)
  if (a.window_only) {  // src's element to its place in the output, p positions along the axis
    index_t src = j * a.inner[src_load], dst = j * a.out_inner + p * a.out_axis_stride;
    for (int d = 0; d < a.nrow_dims; ++d) {
      src += idx[d] * a.outer[src_load][d];
      dst += idx[d] * a.out_outer[d];
    }
    a.out[dst] = a.ptr[src_load][src];
    return;
  }
  const index_t e = row * a.len + j;
  const index_t q = a.axis < a.nrow_dims ? idx[a.axis] : j;
  const int k = a.segment_of(q, p);
  if (k < 0) {
    a.out[e] = T(0);
    return;
  }
  const auto seg = a.segment(k, p);
  const index_t at = q - seg.dst_begin + seg.src_begin;  // the position in the source
  index_t off = (a.axis < a.nrow_dims ? j : at) * a.inner[seg.load];
  for (int d = 0; d < a.nrow_dims; ++d) off += (d == a.axis ? at : idx[d]) * a.outer[seg.load][d];
  a.out[e] = a.ptr[seg.load][off];
}

// The row index of `row` over the row dims (divisions by each extent).
template <class Args>
__device__ KILN_INLINE void axis_copy_row_index(const Args& a, index_t row, index_t* idx) {
  for (index_t d = a.nrow_dims - 1, rest = row; d >= 0; --d) {
    idx[d] = rest % a.row_dims[d];
    rest /= a.row_dims[d];
  }
}

// Short rows: a grid-stride loop over the elements, each finding its row.
template <int NS, class T, class Args>
__global__ void axis_copy_kernel(const Args a) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  const index_t p = a.position();
  const index_t total = a.rows * a.len;
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<index_t>(gridDim.x) * blockDim.x) {
    index_t idx[kMaxRank] = {};
    axis_copy_row_index(a, e / a.len, idx);
    axis_copy_element<NS, T>(a, p, e / a.len, idx, e % a.len);
  }
}

// n elements from src to dst by the block's threads: in 16-byte vectors where both are aligned
// to 16 bytes and n is whole vectors, else element by element.
template <class T>
__device__ KILN_INLINE void axis_copy_run(T* dst, const T* src, index_t n) {
  constexpr index_t kVec = 16 / sizeof(T);
  if constexpr (16 % sizeof(T) == 0) {
    if (((reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) & 15) == 0 && n % kVec == 0) {
      auto* d = reinterpret_cast<uint4*>(dst);
      const auto* s = reinterpret_cast<const uint4*>(src);
      for (index_t v = threadIdx.x; v < n / kVec; v += blockDim.x) d[v] = s[v];
      return;
    }
  }
  for (index_t j = threadIdx.x; j < n; j += blockDim.x) dst[j] = src[j];
}

// Whether row `row` (index idx) is contiguous runs of its sources: every segment that reaches it
// is read with unit stride along the last axis, and the segments cover the whole row (no
// zeros). Then the row is copied run by run (axis_copy_run) instead of element by element: a
// chunk of a fused QKV projection, a concat of heads.
template <class Args>
__device__ KILN_INLINE bool axis_copy_row_runs(const Args& a, index_t p, index_t row, const index_t* idx) {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(a.out)>>;
  if (a.window_only) return false;
  const auto base = [&](int load, index_t axis_at) {  // the row's first element of load at axis position
    index_t off = 0;
    for (int d = 0; d < a.nrow_dims; ++d) off += (d == a.axis ? axis_at : idx[d]) * a.outer[load][d];
    return off;
  };
  if (a.axis < a.nrow_dims) {  // one segment (or none) for the whole row
    const int k = a.segment_of(idx[a.axis], p);
    if (k < 0 || a.inner[a.segment(k, p).load] != 1) return false;
    const auto seg = a.segment(k, p);
    const index_t at = idx[a.axis] - seg.dst_begin + seg.src_begin;  // the position in the source
    axis_copy_run<T>(a.out + row * a.len, a.ptr[seg.load] + base(seg.load, at), a.len);
    return true;
  }
  index_t covered = 0;
  for (int k = 0; k < a.nsegments; ++k) {
    const auto seg = a.segment(k, p);
    if (a.inner[seg.load] != 1) return false;
    covered += seg.len;
  }
  if (covered != a.len) return false;
  for (int k = 0; k < a.nsegments; ++k) {
    const auto seg = a.segment(k, p);
    axis_copy_run<T>(a.out + row * a.len + seg.dst_begin, a.ptr[seg.load] + base(seg.load, 0) + seg.src_begin, seg.len);
  }
  return true;
}

// Rows of at least kAxisCopyRowMin elements: a block per row (grid-stride over the rows), so
// the row's index costs its divisions once per row instead of once per element (ViT's
// [64, 197, 768] concat of the class token and the patches; docs/performance.md).
inline constexpr index_t kAxisCopyRowMin = 128;
template <int NS, class T, class Args>
__global__ void axis_copy_rows_kernel(const Args a) {
  await_previous_kernel();
  const index_t p = a.position();
  for (index_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    index_t idx[kMaxRank] = {};
    axis_copy_row_index(a, row, idx);
    if (axis_copy_row_runs(a, p, row, idx)) continue;
    for (index_t j = threadIdx.x; j < a.len; j += blockDim.x) axis_copy_element<NS, T>(a, p, row, idx, j);
  }
}

template <class Desc>
struct AxisCopyCuda;
template <class T, int NS, class I>
struct AxisCopyCuda<lower::AxisCopyKernel<T, NS, I>> {
  using Args = lower::AxisCopyArgs<T, NS, I>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void*) {
    if (a.len >= kAxisCopyRowMin) {
      if (a.rows == 0) return;
      // A thread per 16-byte vector of a row (up to 256), and up to 32 such blocks per SM: a
      // row of 128 floats is 32 threads' work, and every row of a [4096, 128] chunk is in flight.
      const index_t vectors = (a.len * static_cast<index_t>(sizeof(T)) + 15) / 16;
      const int threads =
          cfg.threads > 0 ? cfg.threads : static_cast<int>(std::clamp<index_t>((vectors + 31) / 32 * 32, 32, 256));
      const auto blocks =
          static_cast<unsigned>(std::min<index_t>(a.rows, index_t{2048} / threads * 4 * multiprocessors()));
      launch_after_previous<&axis_copy_rows_kernel<NS, T, Args>>(blocks, dim3(threads), 0, stream, a);
      KILN_CUDA_CHECK(cudaGetLastError());
    } else {
      launch_grid_stride<&axis_copy_kernel<NS, T, Args>>(a.rows * a.len, cfg, stream, a);
    }
  }
};

}  // namespace kiln::cuda
