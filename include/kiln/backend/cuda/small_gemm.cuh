// kiln: GEMM + epilogue for products with a few rows (m <= 4, a GEMV-like product such as a
// transformer layer at batch 1), one kernel: it reads B once at memory speed and applies the
// epilogue to the sums in registers, so the product is never stored and read back, and a graph
// holds one node per layer instead of two (cuBLASLt, then the epilogue's row kernel).
//
// C[m x n] = A[m x k] B[k x n], B row-major. Lane l of a warp owns V = 4 consecutive columns
// (one 16-byte load per row of B for f32, 8 bytes for bf16 and f16); `L` lanes cover a row's
// tile of L * V columns and the warp's 32 / L lane groups take 32 / L rows at once
// (small_gemm_shape: L = 32, 128-column tiles, where B is wide; else L = 8, 32-column tiles).
// A block owns one tile and one of `splits` ranges of k; its 8 warps stride over that range in
// rounds, each thread issuing its kSmallGemmLoads loads of B of a round before any multiply,
// with A's slice for the round staged in shared memory. Sums are added in a fixed order: the
// lane groups of a warp by shuffles, the warps through shared memory, then the splits: the
// blocks of one column tile (one per split of k, splits <= 8) form a thread-block cluster, and
// each block adds the cluster's sums for its share of the tile's outputs by reading the other
// blocks' shared memory (distributed shared memory, Hopper; run_gemm uses cuBLASLt on older
// devices), applies the epilogue and stores. No scratch, no
// atomics, no block waits for the last one to arrive: the result does not depend on timing.
// The first round of B is issued before `griddepcontrol.wait`: launched with programmatic
// stream serialization (run_gemm's overlap_previous), the kernel streams B while the kernel
// before it finishes.
#pragma once
#include <cooperative_groups.h>

#include "kiln/backend/cuda/gemm.hpp"
#include "kiln/backend/cuda/row_kernel.cuh"

namespace kiln::cuda {

// An epilogue's loads for one output element, read into registers ahead of use: the tree then
// reads them (load slot Acc is the sum; slots the tree does not read are not loaded).
template <class S, class Desc>
struct PreloadedEpilogue {
  using T = compute_t<S>;
  static constexpr int NL = Desc::nloads;
  static constexpr std::uint64_t kReads = lower::tree_loads<typename Desc::epilogue, false>::value;
  static constexpr int NC = Desc::nconsts;
  T v[NL > 0 ? NL : 1] = {};
  T c[NC > 0 ? NC : 1] = {};
  T acc_value = T(0);
  template <class EArgs>
  __device__ __forceinline__ void load(const EArgs& ea, index_t i, index_t j) {
    if constexpr (Desc::has_epilogue) {
      const S* ptr[NL > 0 ? NL : 1];
      lower::row_pointers(ea, i, ptr);
      load_in_row(ea, ptr, j);
    }
  }
  // The same, given row i's pointers (lower::row_pointers), for several elements of one row.
  template <class EArgs>
  __device__ __forceinline__ void load_in_row(const EArgs& ea, const S* const* ptr, index_t j) {
    if constexpr (Desc::has_epilogue) {
#pragma unroll
      for (int k = 0; k < NC; ++k) c[k] = ea.consts[k];
#pragma unroll
      for (int s = 0; s < NL; ++s)
        if (s != Desc::acc_slot && loads_slot(kReads, s)) v[s] = widen(ptr[s][j * ea.inner[s]]);
    }
  }
  template <int L>
  __device__ __forceinline__ T load(index_t) const {
    return L == Desc::acc_slot ? acc_value : v[L];
  }
  template <int L>
  __device__ __forceinline__ T scalar() const {
    return v[L];
  }
  static constexpr int result_bits = significand_bits<S>;
  static constexpr bool row_cache = false;
  __device__ __forceinline__ T constant(int k) const { return c[k]; }
  __device__ __forceinline__ T stage(int) const { return T(0); }
  __device__ __forceinline__ T cached(int, index_t) const { return T(0); }
  __device__ __forceinline__ T eval(T sum, index_t j) {
    acc_value = sum;
    return Desc::epilogue::template eval<T>(*this, j);
  }
};

// Launch bounds: for one row of A (m = 1, a layer at batch 1), at most 80 registers, so that
// three blocks of 256 threads fit on an SM: a product's 192 blocks then leave room for the next
// product's 192 (dependent launch), which stream their B while this one runs. With two blocks
// per SM (116 registers) a 1 x 768 x 3072 product took 10.6 us per call in f32, with three 9.5-9.7 us.
template <class Desc, int MR, int L, class Args>
__global__ void __launch_bounds__(32 * kSmallGemmWarps, MR == 1 ? 3 : 1) small_gemm_kernel(const Args g, int splits) {
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int V = kSmallGemmVector, Tile = L * V, G = 32 / L, Wp = kSmallGemmWarps, U = kSmallGemmLoads;
  constexpr int RoundRows = U * Wp * G;  // rows of B a block loads per round
  using Vec = std::conditional_t<sizeof(S) == 4, float4, float2>;  // V elements
  __shared__ T a_round[MR][RoundRows];
  __shared__ T part[Wp][MR][Tile];
  __shared__ T block_sum[MR * Tile];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, group = lane / L;
  const index_t j0 = static_cast<index_t>(blockIdx.x) * Tile;
  const index_t col = j0 + (lane % L) * V;  // this lane's first column
  const bool has_cols = col < g.n;
  const index_t kper = (g.k + splits - 1) / splits, k0 = blockIdx.y * kper, k1 = k0 + kper < g.k ? k0 + kper : g.k;

  T acc[MR][V];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[i][v] = T(0);
  // Row of B of load u in the round starting at kr: consecutive warps, then loads, take
  // consecutive groups of G rows.
  auto row_of = [&](index_t kr, int u) { return kr + (u * Wp + warp) * G + group; };
  Vec bv[U];
  auto load_b = [&](index_t kr) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const index_t kk = row_of(kr, u);
      bv[u] = has_cols && kk < k1 ? *reinterpret_cast<const Vec*>(g.b.ptr + kk * g.b.row + col) : Vec{};
    }
  };
  // The first round of B is issued before waiting for the previous kernel (launched with
  // programmatic stream serialization, see SmallGemmCuda::run, this kernel may start while the
  // previous one runs; B is then memory the previous kernel does not write, A and the epilogue's
  // loads may be). Without that launch attribute the wait returns at once. Dependents may start
  // once this kernel waited: then only the kernel right before one can still be running.
  load_b(k0);
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  for (index_t kr = k0; kr < k1; kr += RoundRows) {
    if (kr != k0) load_b(kr);
    for (int e = threadIdx.x; e < MR * RoundRows; e += blockDim.x) {
      const int i = e / RoundRows, r = e - i * RoundRows;
      a_round[i][r] = i < g.m && kr + r < k1 ? widen(g.a.ptr[i * g.a.row + (kr + r) * g.a.col]) : T(0);
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const S* bs = reinterpret_cast<const S*>(&bv[u]);
      const int r = (u * Wp + warp) * G + group;
#pragma unroll
      for (int i = 0; i < MR; ++i)
#pragma unroll
        for (int v = 0; v < V; ++v) acc[i][v] += a_round[i][r] * widen(bs[v]);
    }
    __syncthreads();  // a_round is rewritten by the next round
  }
  // The warp's lane groups (rows), by shuffles in a fixed pattern; then lanes of group 0 hold
  // the warp's sums.
#pragma unroll
  for (int off = L; off < 32; off *= 2)
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int v = 0; v < V; ++v) acc[i][v] += __shfl_xor_sync(0xffffffffu, acc[i][v], off);
  if (group == 0)
#pragma unroll
    for (int i = 0; i < MR; ++i)
#pragma unroll
      for (int v = 0; v < V; ++v) part[warp][i][lane * V + v] = acc[i][v];
  __syncthreads();
  // The block's sums: the warps in warp order.
  for (int e = threadIdx.x; e < MR * Tile; e += blockDim.x) {
    const int i = e / Tile, c = e - i * Tile;
    T sum = T(0);
#pragma unroll
    for (int w = 0; w < Wp; ++w) sum += part[w][i][c];
    block_sum[e] = sum;
  }
  // Output (i, j) of the product from its sum: the epilogue over it (its loads read into `pre`
  // by then), or the sum itself.
  auto store = [&](PreloadedEpilogue<S, Desc>& pre, int i, index_t j, T sum) {
    if constexpr (Desc::has_epilogue) g.epilogue.out[i * g.n + j] = narrow<S>(pre.eval(sum, j));
    else g.acc[i * g.n + j] = narrow<S>(sum);
  };
  if (splits == 1) {
    __syncthreads();
    for (int e = threadIdx.x; e < MR * Tile; e += blockDim.x) {
      const int i = e / Tile, c = e - i * Tile;
      if (i >= g.m || j0 + c >= g.n) continue;
      PreloadedEpilogue<S, Desc> pre;
      pre.load(g.epilogue, i, j0 + c);
      store(pre, i, j0 + c, block_sum[e]);
    }
    return;
  }
#if __CUDA_ARCH__ >= 900
  // The cluster is this tile's blocks, one per split, ranked by split. Block `rank` finishes
  // outputs rank, rank + splits, ...: the splits' sums in split order, read from each block's
  // shared memory. The second sync keeps every block's shared memory alive until all have read.
  // A thread finishes at most one output (MR * Tile <= blocks' threads: static_assert below);
  // its epilogue's loads (a bias) are issued before the first cluster barrier, so their trip to
  // memory overlaps the barrier instead of following the adds.
  static_assert(MR * Tile <= 2 * 32 * Wp, "kiln: a thread finishes at most one output of a split tile");
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int e = rank + static_cast<int>(threadIdx.x) * splits, i = e / Tile, c = e - i * Tile;
  const bool mine = e < MR * Tile && i < g.m && j0 + c < g.n;
  PreloadedEpilogue<S, Desc> pre;
  if (mine) pre.load(g.epilogue, i, j0 + c);
  cluster.sync();
  if (mine) {
    T sum = T(0);
    for (int q = 0; q < splits; ++q) sum += cluster.map_shared_rank(block_sum, q)[e];
    store(pre, i, j0 + c, sum);
  }
  // No block may exit, freeing its shared memory, while another still reads it. This thread's
  // reads of other blocks are complete (their sum was used above), so the arrival needs no
  // release fence (cluster.sync()'s arrival would wait for this thread's stores to be visible).
  asm volatile("barrier.cluster.arrive.relaxed;\n\tbarrier.cluster.wait;" ::: "memory");
#else
  __trap();  // clusters need sm_90: run_gemm launches this kernel only on such devices
#endif
}

template <class Desc>
struct SmallGemmCuda;
template <class T, class Epi, int AccSlot, int NL, int NC>
struct SmallGemmCuda<lower::GemmKernel<T, Epi, AccSlot, NL, NC>> {
  using Desc = lower::GemmKernel<T, Epi, AccSlot, NL, NC>;
  using Args = lower::GemmArgs<T, NL, NC>;
  // overlap: launched with programmatic stream serialization, so that it starts, and streams
  // its first rounds of B, while the previous kernel on the stream finishes. Only where that
  // kernel does not write B (the caller checks: run_gemm's overlap_previous). Several splits:
  // launched as clusters of `splits` blocks along y (a tile's blocks).
  template <int MR, int L>
  static void launch_rows(const Args& g, const SmallGemmShape& s, bool overlap, cudaStream_t stream) {
    // The kernel's code must be compiled for sm_90 for clusters (code for an older architecture
    // run on Hopper through its PTX would reach the __trap): say so instead. Such code does not
    // wait for the previous kernel either (griddepcontrol): no overlap then.
    const int arch = kernel_attributes<&small_gemm_kernel<Desc, MR, L, Args>>().ptxVersion;
    overlap = overlap && arch >= 90;
    if (s.splits > 1 && arch < 90)
      throw DeviceError("matmul on cuda: the small-product kernel was built for compute_" + std::to_string(arch) +
                        "; it needs sm_90 code on this device (build with CMAKE_CUDA_ARCHITECTURES 90)");
    const KernelLaunch launch(dim3(static_cast<unsigned>(s.tiles), static_cast<unsigned>(s.splits)), dim3(32 * kSmallGemmWarps), 0,
                              stream, dim3(1, static_cast<unsigned>(s.splits)), overlap);
    launch_kernel<&small_gemm_kernel<Desc, MR, L, Args>>(launch, g, s.splits);
  }
  template <int L>
  static void launch_lanes(const Args& g, const SmallGemmShape& s, bool overlap, cudaStream_t stream) {
    if (g.m <= 1) launch_rows<1, L>(g, s, overlap, stream);
    else if (g.m <= 2) launch_rows<2, L>(g, s, overlap, stream);
    else launch_rows<4, L>(g, s, overlap, stream);
  }
  static void run(const Args& g, const lower::LaunchConfig& cfg, cudaStream_t stream, void* = nullptr) {
    const SmallGemmShape s = small_gemm_shape(g);
    const bool overlap = cfg.chunks == kOverlapPrevious;
    if (s.lanes == 32) launch_lanes<32>(g, s, overlap, stream);
    else launch_lanes<8>(g, s, overlap, stream);
  }
};

}  // namespace kiln::cuda
