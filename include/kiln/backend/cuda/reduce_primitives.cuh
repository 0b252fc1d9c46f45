// kiln: reductions across the threads of a warp and of a block, for the CUDA kernels: sum, max
// and min (NaN wins, as on the CPU), and online softmax's (max, sum) pair.
#pragma once
#include <cuda_runtime.h>

#include "kiln/core/math.hpp"
#include "kiln/expr/ops/reduce.hpp"
#include "kiln/lower/online.hpp"

namespace kiln::cuda {

template <ReduceKind K, class T>
__device__ __forceinline__ T combine(T a, T b) {
  if constexpr (std::is_same_v<T, float> && (K == ReduceKind::Max || K == ReduceKind::Min)) {
    // One instruction where NaN wins (sm_80's max.NaN / min.NaN) instead of compare and select.
    float r;
    if constexpr (K == ReduceKind::Max) asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    else asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  } else if constexpr (K == ReduceKind::Max) return (b != b || b > a) ? b : a;
  else if constexpr (K == ReduceKind::Min) return (b != b || b < a) ? b : a;
  else return a + b;
}

template <ReduceKind K, class T>
__device__ __forceinline__ T warp_reduce(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine<K>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces v over the block (every thread gets the result). scratch: 32 values of shared memory.
template <ReduceKind K, class T>
__device__ __forceinline__ T block_reduce(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_reduce<K>(v);
  __syncthreads();  // scratch may still be read by an earlier reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : Reduce<K, 0, false, false>::template identity<T>();
  return warp_reduce<K>(v);
}

// Online softmax's pair (lower/online.hpp): m the running maximum, d the sum of e^(x - m).
// Bits: the precision of the kernel's results (core/math.hpp), as its Exp op would use.
// Merging (m2, d2) rescales each sum to the larger maximum (m = mn, also -inf: nothing to rescale).
template <int Bits, class T>
__device__ __forceinline__ void online_merge(T& m, T& d, T m2, T d2) {
  const T mn = combine<ReduceKind::Max>(m, m2);
  d = (m == mn ? d : d * math::exp<Bits>(m - mn)) + (m2 == mn ? d2 : d2 * math::exp<Bits>(m2 - mn));
  m = mn;
}
// Adding a value x is merging the pair (x, 1).
template <int Bits, class T>
__device__ __forceinline__ void online_add(T& m, T& d, T x) {
  online_merge<Bits>(m, d, x, T(1));
}
template <int Bits, class T>
__device__ __forceinline__ void warp_online(T& m, T& d) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T m2 = __shfl_xor_sync(0xffffffffu, m, o), d2 = __shfl_xor_sync(0xffffffffu, d, o);
    online_merge<Bits>(m, d, m2, d2);
  }
}
// Over the block (every thread gets the pair). sm, sd: 32 values of shared memory each.
template <int Bits, class T>
__device__ __forceinline__ void block_online(T& m, T& d, T* sm, T* sd) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  warp_online<Bits>(m, d);
  __syncthreads();
  if (lane == 0) sm[warp] = m, sd[warp] = d;
  __syncthreads();
  m = lane < nwarps ? sm[lane] : -std::numeric_limits<T>::infinity();
  d = lane < nwarps ? sd[lane] : T(0);
  warp_online<Bits>(m, d);
}

}  // namespace kiln::cuda
