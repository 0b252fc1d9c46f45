// kiln: the convert kind on CUDA (kiln::cast; lower/args.hpp's ConvertArgs): a grid-stride loop
// over the output's elements, each read through the operand's strides and converted by
// kiln::convert (core/dtype.hpp). Consecutive threads write consecutive elements.
#pragma once
#include <cuda_runtime.h>

#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

template <class To, class From, class Args>
__global__ void convert_kernel(const Args a) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  const index_t total = a.rows * a.len;
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const From* src[1];
    lower::row_pointers(a, e / a.len, src);
    a.to[e] = convert<To>(src[0][(e % a.len) * a.inner[0]]);
  }
}

template <class Desc>
struct ConvertCuda;
template <class To, class From>
struct ConvertCuda<lower::ConvertKernel<To, From>> {
  using Args = lower::ConvertArgs<To, From>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void*) {
    launch_grid_stride<&convert_kernel<To, From, Args>>(a.rows * a.len, cfg, stream, a);
  }
};

}  // namespace kiln::cuda
