// kiln: the row-reduction kind on CUDA: a warp or a block per row (or, for long rows on Hopper,
// the blocks of a thread-block cluster), its stages reduced over the row from registers or
// streamed, then the output tree written.
#pragma once
#include <cooperative_groups.h>

#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/backend/cuda/row_context.cuh"

namespace kiln::cuda {

// The Split register path: v, this block's result of stage s, combined with the other blocks'
// of its cluster (the blocks that share the row, at most kRowClusterMax = 16; the lanes of a
// warp read them), so that every block gets the same value. partial: shared memory, a slot
// per stage (each written once: no block overwrites a slot another may still read; the
// kernel's last cluster barrier keeps them alive).
template <ReduceKind K, class T>
__device__ __forceinline__ T cluster_combine(T v, T* partial, int s) {
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) partial[s] = v;
  cluster.sync();
  // Lane q reads block q's value (the reads in parallel: one round trip, not one per block),
  // then the warp's butterfly combines them: the same tree, so the same value, in every warp
  // of every block (its pairwise combines are commutative).
  const int lane = static_cast<int>(threadIdx.x & 31);
  const T r = lane < static_cast<int>(cluster.num_blocks()) ? cluster.map_shared_rank(partial, lane)[s]
                                                            : Reduce<K, 0, false, false>::template identity<T>();
  return warp_reduce<K>(r);
#else
  __trap();  // clusters need sm_90: the host launches Split kernels only on such devices
  return v;
#endif
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

// Threads per block of the register path (at most): its registers per thread stay launchable.
inline constexpr int kRowRegisterThreads = 256;

// A streamed pass over a row: this thread's units tid, tid + group, ... in that order, each
// given to body(v, ju) with the slots in Mask loaded; up to 4 units' loads (kPointwiseUnits of the
// slots loaded) are issued before the first is used: a long row keeps loads in flight.
template <std::uint64_t Mask, int NL, int W, class Ctx, class Body>
__device__ __forceinline__ void stream_units(const Ctx& ctx, int tid, int group, index_t nu, Body&& body) {
  using S = std::remove_cvref_t<decltype(*ctx.row_ptr[0])>;
  // Fewer units where the pass loads many slots (registers: U x loaded slots 16-byte values).
  constexpr int Loaded = std::popcount(NL >= 64 ? Mask : Mask & ((std::uint64_t{1} << NL) - 1));
  constexpr int U = kPointwiseUnits<Loaded>, NLp = NL > 0 ? NL : 1;
  for (index_t ju0 = tid; ju0 < nu; ju0 += static_cast<index_t>(group) * U) {
    raw_t<S, W> v[U][NLp];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (ju0 + u * group < nu) load_unit<Mask, NL, W>(v[u], ctx.row_ptr, ctx.inner, (ju0 + u * group) * W);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (ju0 + u * group < nu) body(v[u], ju0 + u * group);
  }
}

// A row reduction (every stage, then the output) over units of W elements, one row per group of
// threads (a warp, WarpPerRow, or the block). R > 0: the row's units (the loads the stages
// read) are loaded once into registers, R per thread (nu <= R * group), Cached is false. R = 0:
// each tree loads what it reads; Cached: cached stages keep their values in the group's part of
// dynamic shared memory.
// Online: stages Desc::kOnlineFirst and the next (a softmax's max and sum) in one pass over the
// row (lower/online.hpp); streamed without row caches only.
// Split (the register path, a block per part of a row): the row is shared by the blocks of a
// thread-block cluster along x (launched with one), block rank q holding units q * group * R
// and on; each stage's partial results are combined across the cluster (cluster_combine).
template <class Desc, bool Cached, bool WarpPerRow, int W, int R, bool Online, bool Split, class Args>
__global__ void __launch_bounds__(R > 0 ? kRowRegisterThreads : 1024) row_reduce_kernel(const Args a) {
  await_previous_kernel();
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int NS = Desc::nstages, NL = Desc::nloads, NLp = NL > 0 ? NL : 1;
  static_assert(R == 0 || !Cached, "kiln: the register path keeps no row caches");
  static_assert(!Online || (R == 0 && !Cached && Desc::kOnlineFirst >= 0), "kiln: online pairs are for streamed rows");
  static_assert(!Split || (R > 0 && !WarpPerRow), "kiln: a split row is the register path's, a block per part");
  __shared__ T scratch[32];
  __shared__ T scratch_sum[Online ? 32 : 1];
  __shared__ T partial[Split && NS > 0 ? NS : 1];
  extern __shared__ unsigned char dyn_smem[];
  RowThread t = row_thread<WarpPerRow>();
  index_t u0 = 0;  // the first unit of the row this block holds (Split), else 0
  if constexpr (Split) {
#if __CUDA_ARCH__ >= 900
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    t.row = static_cast<index_t>(blockIdx.x) / cluster.num_blocks();
    u0 = static_cast<index_t>(cluster.block_rank()) * t.group * R;
#else
    __trap();
#endif
  }
  const int group = t.group, tid = t.tid;
  const auto unit = [&](int i) { return u0 + tid + static_cast<index_t>(i) * group; };  // the register path's unit i
  if (WarpPerRow && t.row >= a.rows) return;  // whole warps leave; no block barrier follows
  constexpr int NI = Desc::invariants::size;  // row-invariant values, kept after the stages
  DeviceRowContext<S, NL, Desc::nconsts, NS + NI, Cached> ctx;
  init_context(ctx, a);
  set_row(ctx, a, t.row);
  const index_t nu = a.len / W;
  // Kept stage values: in shared memory (Cached), in registers (the register path, for the stages
  // its descriptor keeps), or none.
  constexpr bool InRegisters = R > 0 && Desc::kCachedStages > 0;
  using Cache = std::conditional_t<Cached, SharedRowCache<T>,
                                   std::conditional_t<InRegisters, RegisterRowCache<T, NS, R, W>, NoRowCache>>;
  T regcache[InRegisters ? NS : 1][InRegisters ? R : 1][InRegisters ? W : 1];
  Cache cache{};
  if constexpr (InRegisters) cache = Cache{regcache};
  if constexpr (Cached) {
    T* base = reinterpret_cast<T*>(dyn_smem) + (WarpPerRow ? (threadIdx.x >> 5) * a.len * Desc::kCachedStages : 0);
    int k = 0, s = 0;
    [&]<class... Ss>(lower::TypeList<Ss...>) { ((ctx.cache[s++] = Ss::cached ? base + (k++) * a.len : nullptr), ...); }(
        typename Desc::stages{});
    cache = Cache{ctx.cache, nu};
  }
  raw_t<S, W> reg[R > 0 ? R : 1][NLp];
  if constexpr (R > 0) {
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (unit(i) < nu) load_unit<stage_loads<typename Desc::stages>::value, NL, W>(reg[i], ctx.row_ptr, ctx.inner, unit(i) * W);
  }
  [&]<class... Ss, int... I>(lower::TypeList<Ss...>, std::integer_sequence<int, I...>) {
    (([&] {
       using St = Ss;
       constexpr int s = I;
       using Op = Reduce<St::kind, 0, false, false>;
       const index_t n = a.stage_len[s], nus = n / W;  // W > 1: every stage spans the row
       if constexpr (Online && s == Desc::kOnlineFirst + 1) {
         return;  // computed with stage s - 1
       } else if constexpr (Online && s == Desc::kOnlineFirst) {
         T m = -std::numeric_limits<T>::infinity(), d = T(0);
         stream_units<lower::tree_loads<typename St::tree, false>::value, NL, W>(
             ctx, tid, group, nus, [&](const raw_t<S, W>(&v)[NLp], index_t ju) {
               online_unit<typename St::tree, S, NL, W>(m, d, v, ctx.consts, ctx.stages, ju);
             });
         if constexpr (WarpPerRow) warp_online<significand_bits<S>>(m, d);
         else block_online<significand_bits<S>>(m, d, scratch, scratch_sum);
         // An infinite maximum: the two-pass sum is NaN (e^(inf - inf) for a +inf entry, or every
         // entry -inf), where the pair kept a count; give the same NaN. An empty row keeps d = 0.
         if (isinf(m) && d != T(0)) d = std::numeric_limits<T>::quiet_NaN();
         ctx.stages[s] = m;
         ctx.stages[s + 1] = d;
         return;
       } else {
         T acc = Op::template identity<T>();
         if constexpr (R > 0) {
#pragma unroll
           for (int i = 0; i < R; ++i)
             if (unit(i) < nus)
               acc = reduce_unit<typename St::tree, St::kind, InRegisters && St::cached, S, NL, W>(
                   acc, reg[i], ctx.consts, ctx.stages, cache, s, unit(i), i);
         } else {
           stream_units<lower::tree_loads<typename St::tree, Cached>::value, NL, W>(
               ctx, tid, group, nus, [&](const raw_t<S, W>(&v)[NLp], index_t ju) {
                 acc = reduce_unit<typename St::tree, St::kind, Cached && St::cached, S, NL, W>(acc, v, ctx.consts,
                                                                                               ctx.stages, cache, s, ju);
               });
         }
         acc = WarpPerRow ? warp_reduce<St::kind>(acc) : block_reduce<St::kind>(acc, scratch);
         if constexpr (Split) acc = cluster_combine<St::kind>(acc, partial, s);
         ctx.stages[s] = Op::template finish<T>(acc, n);
       }
     }()),
     ...);
  }(typename Desc::stages{}, std::make_integer_sequence<int, NS>{});
  [&]<class... Is>(lower::TypeList<Is...>) {
    int i = NS;
    ((ctx.stages[i++] = Is::template eval<T>(ctx, 0)), ...);
  }(typename Desc::invariants{});
  S* out = a.out + t.row * a.len;
  if constexpr (R > 0) {
    constexpr std::uint64_t OutOnly =
        lower::tree_loads<typename Desc::out_tree, false>::value & ~stage_loads<typename Desc::stages>::value;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const index_t ju = unit(i);
      if (ju >= nu) continue;
      load_unit<OutOnly, NL, W>(reg[i], ctx.row_ptr, ctx.inner, ju * W);
      store_unit<typename Desc::out_tree, S, NL, W>(out, reg[i], ctx.consts, ctx.stages, cache, ju, i);
    }
  } else {
    stream_units<lower::tree_loads<typename Desc::out_tree, Cached>::value, NL, W>(
        ctx, tid, group, nu, [&](const raw_t<S, W>(&v)[NLp], index_t ju) {
          store_unit<typename Desc::out_tree, S, NL, W>(out, v, ctx.consts, ctx.stages, cache, ju);
        });
  }
#if __CUDA_ARCH__ >= 900
  // Split: the other blocks may still read this one's partial results.
  if constexpr (Split && NS > 0) cooperative_groups::this_cluster().sync();
#endif
}

// Units a thread of the register path holds.
inline constexpr int kRowRegisterUnits = 4;
// Blocks a split row may span (the cluster's size; above 8, Hopper's non-portable sizes).
inline constexpr int kRowClusterMax = 16;

}  // namespace kiln::cuda
