// kiln: kiln's mma.sync tensor-core GEMM kernel (sm_80 on) with the epilogue fused, for 16-bit
// operands with float accumulation, and the helpers the Hopper kernel shares with it
// (tc_gemm.cuh has the overview).
#pragma once
#include <cstdint>

#include "kiln/backend/cuda/small_gemm.cuh"

namespace kiln::cuda {

inline constexpr int kTcBK = 32;      // k per stage
inline constexpr int kTcStages = 4;   // shared-memory stages in flight

template <int BM, int BN>
inline constexpr std::size_t tc_smem_bytes = static_cast<std::size_t>(BM * kTcBK + kTcBK * BN) * 2 * kTcStages;

namespace tc {

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}
// 16 bytes from global memory to shared memory, or zeros where `bytes` is 0 (past an edge).
__device__ __forceinline__ void copy16(std::uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait_pending() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void ldmatrix4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// c += a b for one 16 x 8 x 16 tile (a: 16 x 16 row-major fragment, b: 16 x 8 column-major).
template <class S>
__device__ __forceinline__ void mma(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  if constexpr (std::is_same_v<S, f16>)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Byte offsets of 16-byte chunk `c` of row `r` in a stage's tiles. A (BM x 32: 4 chunks a row):
// the 8 rows an ldmatrix reads (same chunk) span 4 rows' worth of 128-byte lines twice, so the
// chunk is XORed with bits 1-2 of the row. B (32 x BN: BN / 8 chunks a row): the 8 rows share
// one bank group unpermuted, so the chunk's low 3 bits are XORed with the row's.
__device__ __forceinline__ std::uint32_t a_offset(int r, int c) { return static_cast<std::uint32_t>((r * 4 + (c ^ ((r >> 1) & 3))) * 16); }
template <int BN>
__device__ __forceinline__ std::uint32_t b_offset(int r, int c) {
  return static_cast<std::uint32_t>((r * (BN / 8) + (c ^ (r & 7))) * 16);
}

}  // namespace tc

// Outputs (row, col) and (row, col + 1) for J pairs of columns col = col0 + 8 j of one row,
// from their sums value(j, e): through the epilogue (its loads read from the row's pointers rp,
// lower::row_pointers) or as they are, each rounded once to S and stored as one 4-byte word (col
// is even, n a multiple of 8). Every epilogue input of the J pairs is loaded before the first
// store: a load the source places after a store cannot be moved above it (as far as the
// compiler knows the output may alias an input), and loaded one pair at a time each load's
// latency showed in full (ncu: the first use of each bias value was the epilogue's top stall).
template <class Desc, int J, class Args, class Value, class S = typename Desc::value_type>
__device__ __forceinline__ void store_pairs(const Args& g, index_t row, const S* const* rp, index_t col0, Value value) {
  struct alignas(4) Pair {
    S v[2];
  };
  PreloadedEpilogue<S, Desc> pre[Desc::has_epilogue ? J : 1][2];
  if constexpr (Desc::has_epilogue)
#pragma unroll
    for (int j = 0; j < J; ++j)
      if (col0 + 8 * j < g.n)
#pragma unroll
        for (int e = 0; e < 2; ++e) pre[j][e].load_in_row(g.epilogue, rp, col0 + 8 * j + e);
  S* out = Desc::has_epilogue ? g.epilogue.out : g.acc;
#pragma unroll
  for (int j = 0; j < J; ++j) {
    const index_t col = col0 + 8 * j;
    if (col >= g.n) continue;  // n even: col + 1 < n
    Pair p;
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float r = value(j, e);
      if constexpr (Desc::has_epilogue) r = pre[j][e].eval(r, col + e);
      p.v[e] = narrow<S>(r);
    }
    *reinterpret_cast<Pair*>(out + row * g.n + col) = p;
  }
}

template <class Desc, int BM, int BN, int WTM, int WTN, class Args>
__global__ void __launch_bounds__((BM / WTM) * (BN / WTN) * 32, 1) tc_gemm_kernel(const Args g) {
  await_previous_kernel();
#if __CUDA_ARCH__ >= 800
  using S = typename Desc::value_type;
  constexpr int WarpsN = BN / WTN, Threads = (BM / WTM) * WarpsN * 32;
  constexpr int MI = WTM / 16, NJ = WTN / 8;  // a warp's mma tiles: MI x NJ of 16 x 8
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "kiln: a warp tile is whole 16 x 16 pieces");
  constexpr int ChunksA = BM * kTcBK / 8, ChunksB = kTcBK * BN / 8;  // 16-byte copies per stage
  static_assert(ChunksA % Threads == 0 && ChunksB % Threads == 0, "kiln: a stage's copies divide among the threads");
  constexpr std::uint32_t StageA = BM * kTcBK * 2, StageBytes = StageA + kTcBK * BN * 2;
  extern __shared__ __align__(128) unsigned char tc_smem[];
  const std::uint32_t base = tc::smem_address(tc_smem);
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WarpsN, wn = warp % WarpsN;
  const index_t m0 = static_cast<index_t>(blockIdx.y) * BM, n0 = static_cast<index_t>(blockIdx.x) * BN;
  const int steps = static_cast<int>((g.k + kTcBK - 1) / kTcBK);

  // Stage s <- the k-step kt of A's rows m0.. and B's columns n0.. (zeros past m, n and k).
  auto fill = [&](int s, int kt) {
    const std::uint32_t sa = base + static_cast<std::uint32_t>(s) * StageBytes, sb = sa + StageA;
    const index_t k0 = static_cast<index_t>(kt) * kTcBK;
#pragma unroll
    for (int i = 0; i < ChunksA / Threads; ++i) {
      const int c = tid + i * Threads, r = c >> 2, ch = c & 3;
      const index_t row = m0 + r, kk = k0 + ch * 8;
      const bool in = row < g.m && kk < g.k;
      tc::copy16(sa + tc::a_offset(r, ch), in ? g.a.ptr + row * g.a.row + kk : g.a.ptr, in ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < ChunksB / Threads; ++i) {
      const int c = tid + i * Threads, r = c / (BN / 8), ch = c % (BN / 8);
      const index_t kk = k0 + r, col = n0 + ch * 8;
      const bool in = kk < g.k && col < g.n;
      tc::copy16(sb + tc::b_offset<BN>(r, ch), in ? g.b.ptr + kk * g.b.row + col : g.b.ptr, in ? 16 : 0);
    }
  };

  float acc[MI][NJ][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
  for (int s = 0; s < kTcStages - 1; ++s) {
    if (s < steps) fill(s, s);
    tc::commit();
  }
  for (int kt = 0; kt < steps; ++kt) {
    // Step kt's copies are done (at most kTcStages - 2 later groups pending), and every warp
    // has finished with the stage the next fill overwrites (step kt - 1's).
    tc::wait_pending<kTcStages - 2>();
    __syncthreads();
    if (kt + kTcStages - 1 < steps) fill((kt + kTcStages - 1) % kTcStages, kt + kTcStages - 1);
    tc::commit();
    const std::uint32_t sa = base + static_cast<std::uint32_t>(kt % kTcStages) * StageBytes, sb = sa + StageA;
#pragma unroll
    for (int kk = 0; kk < kTcBK / 16; ++kk) {
      // ldmatrix.x4: lanes 0-15 give rows 0-15 of the first 8 columns, lanes 16-31 of the next 8.
      std::uint32_t af[MI][4], bf[NJ / 2][4];
#pragma unroll
      for (int i = 0; i < MI; ++i) {
        const int r = wm * WTM + i * 16 + (lane & 15);
        tc::ldmatrix4(af[i], sa + tc::a_offset(r, kk * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int j = 0; j < NJ / 2; ++j) {  // two n8 tiles each: {b0, b1} of tile 2j, then of 2j + 1
        const int r = kk * 16 + (lane & 15);
        tc::ldmatrix4_trans(bf[j], sb + tc::b_offset<BN>(r, (wn * WTN + j * 16) / 8 + (lane >> 4)));
      }
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NJ; ++j) tc::mma<S>(acc[i][j], af[i], bf[j / 2][(j & 1) * 2], bf[j / 2][(j & 1) * 2 + 1]);
    }
  }
  tc::wait_pending<0>();

  // Accumulator e of tile (i, j): row lane / 4 (+ 8 for e >= 2), columns 2 (lane % 4) + {0, 1};
  // the epilogue's row pointers computed once per row.
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const index_t row = m0 + wm * WTM + i * 16 + (lane >> 2) + h * 8;
      if (row >= g.m) continue;
      const S* rp[Desc::nloads > 0 ? Desc::nloads : 1];
      if constexpr (Desc::has_epilogue) lower::row_pointers(g.epilogue, row, rp);
      store_pairs<Desc, NJ>(g, row, rp, n0 + wn * WTN + (lane & 3) * 2, [&](int j, int e) { return acc[i][j][h * 2 + e]; });
    }
#else
  __trap();  // mma.sync of 16-bit types needs sm_80: run_gemm uses cuBLASLt before it
#endif
}

}  // namespace kiln::cuda
