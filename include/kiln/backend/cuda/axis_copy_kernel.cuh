// kiln: the axis-copy kind on CUDA (concat, slice, write_slice and their derivatives;
// lower/args.hpp's AxisCopyArgs). Each output element finds its position along the axis, the
// segment covering it (or writes 0), and reads that source through its strides. Consecutive
// threads write consecutive elements; a source whose last stride is 1 is read coalesced too. A run-time position is read by every thread (one cached load) and
// clamped to the axis. A write_slice in place (window_only) walks src's elements instead and
// writes each into its place in the output.
#pragma once
#include <cuda_runtime.h>

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
      const int threads = cfg.threads > 0 ? cfg.threads : 256;
      const auto blocks = static_cast<unsigned>(std::min<index_t>(a.rows, index_t{8} * multiprocessors()));
      launch_after_previous<&axis_copy_rows_kernel<NS, T, Args>>(blocks, dim3(threads), 0, stream, a);
      KILN_CUDA_CHECK(cudaGetLastError());
    } else {
      launch_grid_stride<&axis_copy_kernel<NS, T, Args>>(a.rows * a.len, cfg, stream, a);
    }
  }
};

}  // namespace kiln::cuda
