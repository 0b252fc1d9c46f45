// kiln: the axis-copy kind on CUDA (concat, slice, and their derivatives extract and insert;
// lower/args.hpp's AxisCopyArgs). A grid-stride loop over the output's elements: each finds its
// position along the axis, the segment covering it (or writes 0), and reads that source through
// its strides. Consecutive threads write consecutive elements; a source whose last stride is 1
// is read coalesced too.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>

#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

template <int NS, class T, class Args>
__global__ void axis_copy_kernel(const Args a) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  const index_t total = a.rows * a.len;
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const index_t j = e % a.len;
    index_t idx[kMaxRank] = {};
    for (index_t d = a.nrow_dims - 1, rest = e / a.len; d >= 0; --d) {
      idx[d] = rest % a.row_dims[d];
      rest /= a.row_dims[d];
    }
    const index_t p = a.axis < a.nrow_dims ? idx[a.axis] : j;
    const int s = a.segment_of(p);
    if (s < 0) {
      a.out[e] = T(0);
      continue;
    }
    const index_t q = p - a.dst_begin[s] + a.src_begin[s];  // the position in the source
    index_t off = (a.axis < a.nrow_dims ? j : q) * a.inner[s];
    for (int d = 0; d < a.nrow_dims; ++d) off += (d == a.axis ? q : idx[d]) * a.outer[s][d];
    a.out[e] = a.ptr[s][off];
  }
}

template <class Desc>
struct AxisCopyCuda;
template <class T, int NS>
struct AxisCopyCuda<lower::AxisCopyKernel<T, NS>> {
  using Args = lower::AxisCopyArgs<T, NS>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void*) {
    const index_t total = a.rows * a.len;
    if (total == 0) return;
    const int threads = cfg.threads > 0 ? cfg.threads : 256;
    // Enough blocks to fill the device a few times over; the loop covers the rest.
    const index_t want = (total + threads - 1) / threads;
    const auto blocks = static_cast<unsigned>(std::min<index_t>(want, index_t{8} * multiprocessors()));
    launch_after_previous<&axis_copy_kernel<NS, T, Args>>(blocks, dim3(threads), 0, stream, a);
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
