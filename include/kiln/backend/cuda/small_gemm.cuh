// kiln: GEMM + epilogue for products with a few rows (m <= 4, a GEMV-like product such as a
// transformer layer at batch 1), one kernel: it reads B once at memory speed and applies the
// epilogue to the sums in registers, so the product is never stored and read back, and a graph
// holds one node per layer instead of two (cuBLASLt, then the epilogue's row kernel).
//
// C[m x n] = A[m x k] B[k x n], B row-major. A block owns 32 * V consecutive columns (lane l of
// each warp: V = 4 of them, one 16-byte load (f32) or 8-byte load (bf16, f16) per row of B; so
// 16-bit types get as many column tiles, and blocks, as f32) and one of `splits` ranges of k; its 8
// warps stride over that range in rounds of 8 rows, each round's loads all issued before its
// multiplies (the splits are chosen so that one round covers a warp's share), each thread
// keeping m x V float sums. The warps' sums are added
// through shared memory in warp order. With one split the block then applies the epilogue and
// stores; with several it stores its partial sums (float) in scratch and the last block of
// its column tile to arrive (a counter per tile, taken with an atomic after a fence) adds the
// splits, in a fixed order (interleaved over the block's threads, then those sums in order),
// and applies the epilogue: the result does not depend on timing. That block resets the
// counter, so a graph replays with clean counters. The first round of B is issued before
// `griddepcontrol.wait`: launched with programmatic stream serialization (run_gemm's
// overlap_previous), the kernel streams B while the kernel before it finishes.
#pragma once
#include "kiln/backend/cuda/gemm.hpp"
#include "kiln/backend/cuda/row_kernel.cuh"

namespace kiln::cuda {

// The epilogue's context for one output element: load slot Acc reads the sum in a register;
// the other loads read memory like the row kernel's.
template <class Base, int Acc>
struct AccContext : Base {
  typename Base::C acc_value;
  template <int S>
  __device__ __forceinline__ typename Base::C load(index_t j) const {
    if constexpr (S == Acc) return acc_value;
    else return Base::template load<S>(j);
  }
};

template <class Desc, int MR, class Args>
__global__ void __launch_bounds__(32 * kSmallGemmWarps) small_gemm_kernel(const Args g, float* scratch, unsigned* counters,
                                                                          int splits) {
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int V = kSmallGemmVector;
  constexpr int Tile = 32 * V;
  using Vec = std::conditional_t<sizeof(S) == 4, float4, float2>;  // V elements
  __shared__ T part[kSmallGemmWarps][MR][Tile];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const index_t j0 = static_cast<index_t>(blockIdx.x) * Tile;
  const index_t col = j0 + lane * V;  // this lane's first column
  const int split = blockIdx.y;
  const index_t kper = (g.k + splits - 1) / splits, k0 = split * kper, k1 = k0 + kper < g.k ? k0 + kper : g.k;

  T acc[MR][V];
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int v = 0; v < V; ++v) acc[i][v] = T(0);
  // Rounds of U rows of B per warp, all U loads issued before the first multiply: a warp has U
  // loads in flight whatever its share of k (a plain loop over a few rows waits for each load
  // in turn, one memory latency per row).
  constexpr int U = kSmallGemmRowsPerRound;
  const bool has_cols = col < g.n;
  Vec bv[U];
  auto load_b = [&](index_t kk0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const index_t kk = kk0 + u * kSmallGemmWarps;
      bv[u] = kk < k1 ? *reinterpret_cast<const Vec*>(g.b.ptr + kk * g.b.row + col) : Vec{};
    }
  };
  // The first round of B is issued before waiting for the previous kernel (launched with
  // programmatic stream serialization, see SmallGemmCuda::run, this kernel may start while the
  // previous one runs; B is then memory the previous kernel does not write, A and the epilogue's
  // loads may be). Without that launch attribute the wait returns at once. Dependents may start
  // once this kernel waited: then only the kernel right before one can still be running.
  if (has_cols && k0 + warp < k1) load_b(k0 + warp);
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  if (has_cols) {
    for (index_t kk0 = k0 + warp; kk0 < k1; kk0 += U * kSmallGemmWarps) {
      if (kk0 != k0 + warp) load_b(kk0);
      T av[MR][U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const index_t kk = kk0 + u * kSmallGemmWarps;
        const bool in = kk < k1;
#pragma unroll
        for (int i = 0; i < MR; ++i) av[i][u] = in && i < g.m ? widen(g.a.ptr[i * g.a.row + kk * g.a.col]) : T(0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const S* bs = reinterpret_cast<const S*>(&bv[u]);
#pragma unroll
        for (int i = 0; i < MR; ++i)
#pragma unroll
          for (int v = 0; v < V; ++v) acc[i][v] += av[i][u] * widen(bs[v]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < MR; ++i)
#pragma unroll
    for (int v = 0; v < V; ++v) part[warp][i][lane * V + v] = acc[i][v];
  __syncthreads();

  // Each thread finishes (row, column) pairs of the tile: the warps' sums in warp order.
  auto tile_sum = [&](int i, int c) {
    T s = T(0);
#pragma unroll
    for (int w = 0; w < kSmallGemmWarps; ++w) s += part[w][i][c];
    return s;
  };
  auto finish = [&](int i, index_t j, T sum) {
    if constexpr (Desc::has_epilogue) {
      AccContext<DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false>, Desc::acc_slot> ctx;
      init_context(ctx, g.epilogue);
      set_row(ctx, g.epilogue, i);
      ctx.acc_value = sum;
      g.epilogue.out[i * g.n + j] = narrow<S>(Desc::epilogue::template eval<T>(ctx, j));
    } else {
      g.acc[i * g.n + j] = narrow<S>(sum);
    }
  };

  if (splits == 1) {
    for (int e = threadIdx.x; e < MR * Tile; e += blockDim.x) {
      const int i = e / Tile, c = e - i * Tile;
      if (i < g.m && j0 + c < g.n) finish(i, j0 + c, tile_sum(i, c));
    }
    return;
  }
  // Several splits: this block's sums to scratch[split][i][j]; the last block of the tile adds them.
  for (int e = threadIdx.x; e < MR * Tile; e += blockDim.x) {
    const int i = e / Tile, c = e - i * Tile;
    if (i < g.m && j0 + c < g.n) scratch[(static_cast<index_t>(split) * g.m + i) * g.n + j0 + c] = tile_sum(i, c);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned arrived = atomicAdd(&counters[blockIdx.x], 1u);
    last = arrived == static_cast<unsigned>(splits - 1);
    if (last) counters[blockIdx.x] = 0;  // every block of the tile has arrived: reset for the next call
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  // Threads q, q + Q, ... of each output add the splits q, q + Q, ... (Q threads per output, so
  // the loads of many splits are in flight at once), then thread q = 0 adds the Q sums in order.
  constexpr int Outputs = MR * Tile, Q = 32 * kSmallGemmWarps / Outputs > 0 ? 32 * kSmallGemmWarps / Outputs : 1;
  T* sums = &part[0][0][0];  // Q x Outputs; the warps' sums above are no longer needed
  for (int e = threadIdx.x; e < Outputs * Q; e += blockDim.x) {
    const int o = e % Outputs, q = e / Outputs, i = o / Tile, c = o - i * Tile;
    T sum = T(0);
    if (i < g.m && j0 + c < g.n) {
#pragma unroll 16
      for (int sp = q; sp < splits; sp += Q) sum += __ldcg(&scratch[(static_cast<index_t>(sp) * g.m + i) * g.n + j0 + c]);
    }
    sums[q * Outputs + o] = sum;
  }
  __syncthreads();
  for (int o = threadIdx.x; o < Outputs; o += blockDim.x) {
    const int i = o / Tile, c = o - i * Tile;
    if (i >= g.m || j0 + c >= g.n) continue;
    T sum = T(0);
    for (int q = 0; q < Q; ++q) sum += sums[q * Outputs + o];
    finish(i, j0 + c, sum);
  }
}

template <class Desc>
struct SmallGemmCuda;
template <class T, class Epi, int AccSlot, int NL, int NC>
struct SmallGemmCuda<lower::GemmKernel<T, Epi, AccSlot, NL, NC>> {
  using Desc = lower::GemmKernel<T, Epi, AccSlot, NL, NC>;
  using Args = cpu::GemmArgs<T, NL, NC>;
  // overlap: launched with programmatic stream serialization, so that it starts, and streams
  // its first rounds of B, while the previous kernel on the stream finishes. Only where that
  // kernel does not write B (the caller checks: run_gemm's overlap_previous).
  template <int MR>
  static void launch_rows(const Args& g, dim3 grid, float* partials, unsigned* counters, int splits, bool overlap,
                          cudaStream_t stream) {
    cudaLaunchConfig_t lc{};
    lc.gridDim = grid;
    lc.blockDim = dim3(32 * kSmallGemmWarps);
    lc.stream = stream;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    lc.attrs = &attr;
    lc.numAttrs = overlap ? 1 : 0;
    KILN_CUDA_CHECK(cudaLaunchKernelEx(&lc, small_gemm_kernel<Desc, MR, Args>, g, partials, counters, splits));
  }
  static void run(const Args& g, const cpu::LaunchConfig& cfg, cudaStream_t stream, void* scratch) {
    const SmallGemmShape s = small_gemm_shape(g);
    auto* counters = static_cast<unsigned*>(scratch);
    auto* partials = reinterpret_cast<float*>(static_cast<unsigned char*>(scratch) + s.counter_bytes);
    const dim3 grid(static_cast<unsigned>(s.tiles), static_cast<unsigned>(s.splits));
    const bool overlap = cfg.chunks == kOverlapPrevious;
    if (g.m <= 1) launch_rows<1>(g, grid, partials, counters, s.splits, overlap, stream);
    else if (g.m <= 2) launch_rows<2>(g, grid, partials, counters, s.splits, overlap, stream);
    else launch_rows<4>(g, grid, partials, counters, s.splits, overlap, stream);
  }
};

}  // namespace kiln::cuda
