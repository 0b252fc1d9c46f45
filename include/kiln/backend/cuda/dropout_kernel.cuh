// kiln: the dropout kind on CUDA (kiln::dropout; lower/args.hpp's DropoutArgs): a grid-stride
// loop over blocks of four consecutive output elements, one Philox4x32-10 block each (the four
// words of one call), the same bits the CPU kernel draws.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/core/philox.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

template <class T, class Args>
__global__ void dropout_kernel(const Args a) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  const auto seed = static_cast<std::uint64_t>(a.ids[0]), offset = static_cast<std::uint64_t>(a.ids[1]);
  const index_t total = a.rows * a.len, blocks = (total + 3) / 4;
  for (index_t b = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const philox::Words words = philox::block(seed, offset, a.stream, static_cast<std::uint64_t>(b));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const index_t e = b * 4 + k;
      if (e >= total) break;
      const T* src[1];
      lower::row_pointers(a, e / a.len, src);
      const bool keep = philox::to_uniform(words.w[k]) >= a.p;
      a.out[e] = keep ? narrow<T>(widen(src[0][(e % a.len) * a.inner[0]]) * a.scale) : T(0);
    }
  }
}

template <class Desc>
struct DropoutCuda;
template <class T>
struct DropoutCuda<lower::DropoutKernel<T>> {
  using Args = lower::DropoutArgs<T>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void*) {
    launch_grid_stride<&dropout_kernel<T, Args>>((a.rows * a.len + 3) / 4, cfg, stream, a);
  }
};

}  // namespace kiln::cuda
