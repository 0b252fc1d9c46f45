// kiln: the row kernel on CUDA (pointwise and row-reduction kinds), one __global__ template
// instantiated per lowered RowKernel descriptor. Arguments are the CPU backend's RowArgs,
// passed by value (trivially copyable: pointers, strides, extents, scalars).
//
// Pointwise (no stages): a grid-stride loop over rows x len. Where every load has inner stride
// 1 or 0, rows are whole vectors and pointers are 16-byte aligned, each thread moves 16 bytes
// per load and store (float4): the maths runs per lane on registers indexed by compile-time
// lane numbers.
//
// Row reduction: a warp per row (rows up to kWarpRowMax) or a block per row. Each stage
// reduces its tree over the row (shuffles, then shared memory across warps); NaN wins max/min
// as on the CPU; the epilogue tree then writes the row. Stage values a later tree reads
// (LCached) are kept in shared memory when the row fits, else recomputed.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "kiln/backend/cpu/row_kernel.hpp"
#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/runtime.hpp"

namespace kiln::cuda {

inline constexpr index_t kWarpRowMax = 2048;     // rows up to this length: a warp per row
inline constexpr std::size_t kRowCacheBytes = 40 * 1024;  // cached stages; under the 48 KiB a block gets without opt-in

template <ReduceKind K, class T>
__device__ __forceinline__ T combine(T a, T b) {
  if constexpr (K == ReduceKind::Max) return (b != b || b > a) ? b : a;
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

// T: the storage type of loads; C: the compute type, in which values, stages and caches are kept.
template <class T, int NL, int NC, int NS, bool Cached>
struct DeviceRowContext {
  using C = compute_t<T>;
  static constexpr bool row_cache = Cached;
  const T* row_ptr[NL > 0 ? NL : 1];
  index_t inner[NL > 0 ? NL : 1];
  C consts[NC > 0 ? NC : 1];
  C stages[NS > 0 ? NS : 1];
  C* cache[NS > 0 ? NS : 1];

  __device__ __forceinline__ C cached(int s, index_t j) const { return cache[s][j]; }
  template <int S>
  __device__ __forceinline__ C load(index_t j) const {
    return widen(row_ptr[S][j * inner[S]]);
  }
  template <int S>
  __device__ __forceinline__ C scalar() const {
    return widen(row_ptr[S][0]);
  }
  __device__ __forceinline__ C constant(int c) const { return consts[c]; }
  __device__ __forceinline__ C stage(int k) const { return stages[k]; }
};

template <class Ctx, class Args>
__device__ __forceinline__ void init_context(Ctx& ctx, const Args& a) {
  constexpr int NL = sizeof(a.inner) / sizeof(a.inner[0]);
  constexpr int NC = sizeof(a.consts) / sizeof(a.consts[0]);
#pragma unroll
  for (int s = 0; s < NL; ++s) ctx.inner[s] = a.inner[s];
#pragma unroll
  for (int c = 0; c < NC; ++c) ctx.consts[c] = a.consts[c];
}

// Points ctx's loads at row `row` (row-major over row_dims).
template <class Ctx, class Args>
__device__ __forceinline__ void set_row(Ctx& ctx, const Args& a, index_t row) {
  constexpr int NL = sizeof(a.inner) / sizeof(a.inner[0]);
  index_t off[NL] = {};
  for (int d = a.nrow_dims - 1; d >= 0; --d) {
    const index_t i = row % a.row_dims[d];
    row /= a.row_dims[d];
#pragma unroll
    for (int s = 0; s < NL; ++s) off[s] += i * a.outer[s][d];
  }
#pragma unroll
  for (int s = 0; s < NL; ++s) ctx.row_ptr[s] = a.ptr[s] + off[s];
}

// Lane K of a vector of W elements: loads read registers the thread filled with 16-byte loads
// (widened to the compute type T); stages and row caches (row kernels) are the row's. Row
// caches hold lane K of vector jv at K * nv + jv (nv vectors per row): consecutive threads
// touch consecutive words, so shared memory serves a warp without bank conflicts.
template <class T, int NL, int W, int K, bool Cached = false>
struct LaneContext {
  static constexpr bool row_cache = Cached;
  const T (&v)[NL > 0 ? NL : 1][W];
  const T* consts;
  const T* stages = nullptr;
  T* const* cache = nullptr;
  index_t jv = 0, nv = 0;
  template <int S>
  __device__ __forceinline__ T load(index_t) const {
    return v[S][K];
  }
  template <int S>
  __device__ __forceinline__ T scalar() const {
    return v[S][0];
  }
  __device__ __forceinline__ T constant(int c) const { return consts[c]; }
  __device__ __forceinline__ T stage(int k) const { return stages[k]; }
  __device__ __forceinline__ T cached(int s, index_t) const { return cache[s][K * nv + jv]; }
};

// Fills v[s][0..W) with the W elements of load s from column j on (a 16-byte load where the
// load's inner stride is 1; its one element, broadcast, where it is 0).
template <int NL, int W, class S, class T>
__device__ __forceinline__ void load_lanes(T (&v)[NL > 0 ? NL : 1][W], const S* const* ptr, const index_t* inner, index_t j) {
#pragma unroll
  for (int s = 0; s < NL; ++s) {
    if (inner[s] == 1) {
      const float4 x = *reinterpret_cast<const float4*>(ptr[s] + j);
      const S* xs = reinterpret_cast<const S*>(&x);
#pragma unroll
      for (int k = 0; k < W; ++k) v[s][k] = widen(xs[k]);
    } else {
      const T x = widen(ptr[s][0]);
#pragma unroll
      for (int k = 0; k < W; ++k) v[s][k] = x;
    }
  }
}

template <class Desc>
struct RowKernelCuda;

template <class Desc, class Args>
__global__ void pointwise_scalar_kernel(const Args a) {
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false> ctx;
  init_context(ctx, a);
  const index_t total = a.rows * a.len;
  const index_t stride = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t e = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const index_t r = a.rows == 1 ? 0 : e / a.len, j = a.rows == 1 ? e : e - r * a.len;
    set_row(ctx, a, r);
    a.out[e] = narrow<S>(Desc::out_tree::template eval<T>(ctx, j));
  }
}

// Every load's inner stride is 0 or 1, len % W == 0 and every pointer 16-byte aligned. W
// elements of storage type S per 16 bytes (4 f32, 8 bf16 or f16), computed in T.
template <class Desc, class Args>
__global__ void pointwise_vector_kernel(const Args a) {
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int NL = Desc::nloads > 0 ? Desc::nloads : 1;
  constexpr int W = 16 / sizeof(S);
  using V = float4;
  const index_t vlen = a.len / W, total = a.rows * vlen;
  const index_t stride = static_cast<index_t>(gridDim.x) * blockDim.x;
  T consts[Desc::nconsts > 0 ? Desc::nconsts : 1];
#pragma unroll
  for (int c = 0; c < Desc::nconsts; ++c) consts[c] = a.consts[c];
  for (index_t e = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += stride) {
    const index_t r = a.rows == 1 ? 0 : e / vlen, j = (a.rows == 1 ? e : e - r * vlen) * W;
    index_t row = r;
    index_t off[NL] = {};
    for (int d = a.nrow_dims - 1; d >= 0 && a.rows > 1; --d) {
      const index_t i = row % a.row_dims[d];
      row /= a.row_dims[d];
#pragma unroll
      for (int s = 0; s < Desc::nloads; ++s) off[s] += i * a.outer[s][d];
    }
    const S* p[NL];
#pragma unroll
    for (int s = 0; s < Desc::nloads; ++s) p[s] = a.ptr[s] + off[s];
    T v[NL][W];
    load_lanes<Desc::nloads, W>(v, p, a.inner, j);
    V o;
    S* os = reinterpret_cast<S*>(&o);
    [&]<int... K>(std::integer_sequence<int, K...>) {
      ((os[K] = narrow<S>(Desc::out_tree::template eval<T>(LaneContext<T, Desc::nloads, W, K>{v, consts}, j + K))), ...);
    }(std::make_integer_sequence<int, W>{});
    *reinterpret_cast<V*>(a.out + r * a.len + j) = o;
  }
}

// The row a thread works on: a warp's (WarpPerRow) or its block's; group threads share it,
// this one being number tid among them.
struct RowThread {
  int group, tid;
  index_t row;
};
template <bool WarpPerRow>
__device__ __forceinline__ RowThread row_thread() {
  const int group = WarpPerRow ? 32 : static_cast<int>(blockDim.x);
  const int tid = WarpPerRow ? static_cast<int>(threadIdx.x & 31) : static_cast<int>(threadIdx.x);
  const index_t row = static_cast<index_t>(blockIdx.x) * (blockDim.x / group) + (WarpPerRow ? threadIdx.x >> 5 : 0);
  return {group, tid, row};
}

// Points ctx at row r: its loads, and its row caches (cached stages only) in the warp's (or the
// block's) part of dynamic shared memory, a.len values per cached stage.
template <class Desc, bool WarpPerRow, class Ctx, class Args>
__device__ __forceinline__ void start_row(Ctx& ctx, const Args& a, index_t r, unsigned char* dyn_smem) {
  init_context(ctx, a);
  if constexpr (Ctx::row_cache) {
    using T = compute_t<typename Desc::value_type>;
    T* base = reinterpret_cast<T*>(dyn_smem) + (WarpPerRow ? (threadIdx.x >> 5) * a.len * Desc::kCachedStages : 0);
    int k = 0, s = 0;
    [&]<class... Ss>(lower::TypeList<Ss...>) { ((ctx.cache[s++] = Ss::cached ? base + (k++) * a.len : nullptr), ...); }(
        typename Desc::stages{});
  }
  set_row(ctx, a, r);
}

// One row per group of G threads (G = 32: a warp; G = blockDim.x: the block).
template <class Desc, bool Cached, bool WarpPerRow, class Args>
__global__ void row_reduce_kernel(const Args a) {
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int NS = Desc::nstages;
  __shared__ T scratch[32];
  extern __shared__ unsigned char dyn_smem[];
  const RowThread t = row_thread<WarpPerRow>();
  const int group = t.group, tid = t.tid;
  if (WarpPerRow && t.row >= a.rows) return;  // whole warps leave; no block barrier follows
  DeviceRowContext<S, Desc::nloads, Desc::nconsts, NS, Cached> ctx;
  start_row<Desc, WarpPerRow>(ctx, a, t.row, dyn_smem);
  const index_t r = t.row;
  [&]<class... Ss>(lower::TypeList<Ss...>) {
    int s = 0;
    (([&] {
       using St = Ss;
       using Op = Reduce<St::kind, 0, false, false>;
       T acc = Op::template identity<T>();
       const index_t n = a.stage_len[s];
       for (index_t j = tid; j < n; j += group) {
         const T v = St::tree::template eval<T>(ctx, j);
         if constexpr (Cached && St::cached) ctx.cache[s][j] = v;
         acc = combine<St::kind>(acc, v);
       }
       acc = WarpPerRow ? warp_reduce<St::kind>(acc) : block_reduce<St::kind>(acc, scratch);
       ctx.stages[s] = Op::template finish<T>(acc, n);
       ++s;
     }()),
     ...);
  }(typename Desc::stages{});
  S* out = a.out + r * a.len;
  for (index_t j = tid; j < a.len; j += group) out[j] = narrow<S>(Desc::out_tree::template eval<T>(ctx, j));
}

// Combines Tree's values at lanes K... of vector jv into acc, in lane order; with Keep also
// stores each in the stage's row cache (at K * nv + jv, as LaneContext reads it).
template <class Tree, ReduceKind Kind, bool Keep, bool Cached, int NL, int W, class T, int... K>
__device__ __forceinline__ T reduce_lanes(T acc, const T (&v)[NL > 0 ? NL : 1][W], const T* consts, const T* stages,
                                         T* const* cache, T* keep, index_t jv, index_t nv, std::integer_sequence<int, K...>) {
  ((acc = combine<Kind>(acc, [&] {
      const T x = Tree::template eval<T>(LaneContext<T, NL, W, K, Cached>{v, consts, stages, cache, jv, nv}, jv * W + K);
      if constexpr (Keep) keep[K * nv + jv] = x;
      return x;
    }())),
   ...);
  return acc;
}

// The row kernel with 16-byte loads and stores: each thread takes W consecutive columns at a
// time (4 f32, 8 bf16/f16) in every stage and in the output, so a thread reads and writes the
// same columns throughout (its row-cache entries are its own). Needs what the vector pointwise
// kernel needs, and every stage's length equal to the row's.
template <class Desc, bool Cached, bool WarpPerRow, class Args>
__global__ void row_reduce_vector_kernel(const Args a) {
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int NS = Desc::nstages, NL = Desc::nloads, W = 16 / sizeof(S);
  __shared__ T scratch[32];
  extern __shared__ unsigned char dyn_smem[];
  const RowThread t = row_thread<WarpPerRow>();
  const int group = t.group, tid = t.tid;
  if (WarpPerRow && t.row >= a.rows) return;  // whole warps leave; no block barrier follows
  DeviceRowContext<S, NL, Desc::nconsts, NS, Cached> ctx;
  start_row<Desc, WarpPerRow>(ctx, a, t.row, dyn_smem);
  const index_t r = t.row;
  const index_t nv = a.len / W;
  [&]<class... Ss>(lower::TypeList<Ss...>) {
    int s = 0;
    (([&] {
       using St = Ss;
       using Op = Reduce<St::kind, 0, false, false>;
       T acc = Op::template identity<T>();
       for (index_t jv = tid; jv < nv; jv += group) {
         T v[NL > 0 ? NL : 1][W];
         load_lanes<NL, W>(v, ctx.row_ptr, ctx.inner, jv * W);
         acc = reduce_lanes<typename St::tree, St::kind, Cached && St::cached, Cached, NL, W>(
             acc, v, ctx.consts, ctx.stages, ctx.cache, Cached && St::cached ? ctx.cache[s] : nullptr, jv, nv,
             std::make_integer_sequence<int, W>{});
       }
       acc = WarpPerRow ? warp_reduce<St::kind>(acc) : block_reduce<St::kind>(acc, scratch);
       ctx.stages[s] = Op::template finish<T>(acc, a.len);
       ++s;
     }()),
     ...);
  }(typename Desc::stages{});
  S* out = a.out + r * a.len;
  for (index_t jv = tid; jv < nv; jv += group) {
    T v[NL > 0 ? NL : 1][W];
    load_lanes<NL, W>(v, ctx.row_ptr, ctx.inner, jv * W);
    float4 o;
    S* os = reinterpret_cast<S*>(&o);
    [&]<int... K>(std::integer_sequence<int, K...>) {
      ((os[K] = narrow<S>(Desc::out_tree::template eval<T>(
            LaneContext<T, NL, W, K, Cached>{v, ctx.consts, ctx.stages, ctx.cache, jv, nv}, jv * W + K))),
       ...);
    }(std::make_integer_sequence<int, W>{});
    *reinterpret_cast<float4*>(out + jv * W) = o;
  }
}

template <class T, class Out, class... Stages, int NL, int NC>
struct RowKernelCuda<lower::RowKernel<T, Out, lower::TypeList<Stages...>, NL, NC>> {
  using Desc = lower::RowKernel<T, Out, lower::TypeList<Stages...>, NL, NC>;
  static constexpr int NS = sizeof...(Stages);
  using Args = cpu::RowArgs<T, NL, NC, NS>;
  struct DescEx : Desc {
    static constexpr int kCachedStages = (0 + ... + Stages::cached);
  };

  static bool vectorizable(const Args& a) {
    if constexpr (sizeof(T) > 4) return false;  // 16-byte vectors of f32, bf16 or f16 (f64: scalar)
    constexpr int W = 16 / sizeof(T);
    if (a.len % W != 0 || reinterpret_cast<std::uintptr_t>(a.out) % 16 != 0) return false;
    for (int s = 0; s < NL; ++s) {
      if (a.inner[s] != 0 && a.inner[s] != 1) return false;
      if (a.inner[s] == 1) {
        if (reinterpret_cast<std::uintptr_t>(a.ptr[s]) % 16 != 0) return false;
        for (int d = 0; d < a.nrow_dims; ++d)
          if (a.outer[s][d] % W != 0) return false;
      }
    }
    return true;
  }

  // config.threads: threads per block (0: 256); config.variant for row reductions: 1 a warp per
  // row, 2 a block per row (0: by the row's length); config.chunks 1: element loads even where
  // 16-byte ones would do (a MaxAutotune candidate).
  static void run(const Args& a, const cpu::LaunchConfig& cfg, cudaStream_t stream, void* = nullptr) {
    if (a.rows == 0 || a.len == 0) return;
    const int threads = cfg.threads > 0 ? cfg.threads : 256;
    if constexpr (NS == 0) {
      const bool vec = cfg.chunks != 1 && vectorizable(a);
      const index_t work = vec ? a.rows * a.len / (16 / static_cast<index_t>(sizeof(T))) : a.rows * a.len;
      const index_t blocks = std::min<index_t>((work + threads - 1) / threads, index_t{1} << 20);
      if (vec) pointwise_vector_kernel<Desc><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(a);
      else pointwise_scalar_kernel<Desc><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(a);
    } else {
      const bool warp = cfg.variant == 1 || (cfg.variant == 0 && a.len <= kWarpRowMax);
      const int rows_per_block = warp ? threads / 32 : 1;
      const std::size_t cache_bytes = static_cast<std::size_t>(DescEx::kCachedStages) * a.len * sizeof(compute_t<T>) * rows_per_block;
      const bool cached = DescEx::kCachedStages > 0 && a.row_cache && cache_bytes <= kRowCacheBytes;
      const unsigned blocks = static_cast<unsigned>((a.rows + rows_per_block - 1) / rows_per_block);
      const std::size_t smem = cached ? cache_bytes : 0;
      bool vec = cfg.chunks != 1 && vectorizable(a);
      for (int s = 0; s < NS; ++s) vec = vec && a.stage_len[s] == a.len;
      if (vec) {
        if (warp) {
          if (cached) row_reduce_vector_kernel<DescEx, true, true><<<blocks, threads, smem, stream>>>(a);
          else row_reduce_vector_kernel<DescEx, false, true><<<blocks, threads, 0, stream>>>(a);
        } else {
          if (cached) row_reduce_vector_kernel<DescEx, true, false><<<blocks, threads, smem, stream>>>(a);
          else row_reduce_vector_kernel<DescEx, false, false><<<blocks, threads, 0, stream>>>(a);
        }
      } else if (warp) {
        if (cached) row_reduce_kernel<DescEx, true, true><<<blocks, threads, smem, stream>>>(a);
        else row_reduce_kernel<DescEx, false, true><<<blocks, threads, 0, stream>>>(a);
      } else {
        if (cached) row_reduce_kernel<DescEx, true, false><<<blocks, threads, smem, stream>>>(a);
        else row_reduce_kernel<DescEx, false, false><<<blocks, threads, 0, stream>>>(a);
      }
    }
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
