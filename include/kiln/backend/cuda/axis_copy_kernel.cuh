// kiln: the axis-copy kind on CUDA (concat, slice, write_slice and their derivatives;
// lower/args.hpp's AxisCopyArgs). A grid-stride loop over the output's elements: each finds its
// position along the axis, the segment covering it (or writes 0), and reads that source through
// its strides. Consecutive threads write consecutive elements; a source whose last stride is 1
// is read coalesced too. A run-time position is read by every thread (one cached load) and
// clamped to the axis. A write_slice in place (window_only) walks src's elements instead and
// writes each into its place in the output.
#pragma once
#include <cuda_runtime.h>

#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

template <int NS, class T, class Args>
__global__ void axis_copy_kernel(const Args a) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  const index_t p = a.position();
  constexpr int src_load = NS >= 2 ? 1 : 0;  // write_slice's src (window_only has two sources)
  const index_t total = a.rows * a.len;
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t j = e % a.len;
    index_t idx[kMaxRank] = {};
    for (index_t d = a.nrow_dims - 1, rest = e / a.len; d >= 0; --d) {
      idx[d] = rest % a.row_dims[d];
      rest /= a.row_dims[d];
    }
    if (a.window_only) {  // src's element to its place in the output, p positions along the axis
      index_t src = j * a.inner[src_load], dst = j * a.out_inner + p * a.out_axis_stride;
      for (int d = 0; d < a.nrow_dims; ++d) {
        src += idx[d] * a.outer[src_load][d];
        dst += idx[d] * a.out_outer[d];
      }
      a.out[dst] = a.ptr[src_load][src];
      continue;
    }
    const index_t q = a.axis < a.nrow_dims ? idx[a.axis] : j;
    const int k = a.segment_of(q, p);
    if (k < 0) {
      a.out[e] = T(0);
      continue;
    }
    const auto seg = a.segment(k, p);
    const index_t at = q - seg.dst_begin + seg.src_begin;  // the position in the source
    index_t off = (a.axis < a.nrow_dims ? j : at) * a.inner[seg.load];
    for (int d = 0; d < a.nrow_dims; ++d) off += (d == a.axis ? at : idx[d]) * a.outer[seg.load][d];
    a.out[e] = a.ptr[seg.load][off];
  }
}

template <class Desc>
struct AxisCopyCuda;
template <class T, int NS, class I>
struct AxisCopyCuda<lower::AxisCopyKernel<T, NS, I>> {
  using Args = lower::AxisCopyArgs<T, NS, I>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void*) {
    launch_grid_stride<&axis_copy_kernel<NS, T, Args>>(a.rows * a.len, cfg, stream, a);
  }
};

}  // namespace kiln::cuda
