// kiln: GEMM + epilogue on tensor cores, kiln's own kernels, for 16-bit operands (bf16, f16)
// with float accumulation: the epilogue is applied to the accumulators in registers, so an
// epilogue cuBLASLt cannot express (an exact gelu, a residual add) costs no pass over the
// product. MaxAutotune times them against cuBLASLt (gemm_candidates); the default is cuBLASLt,
// which is faster today (docs/notes/cuda-status.md has the figures).
//
// C[m x n] = A[m x k] B[k x n], both row-major (rows of whole 16-byte chunks, k and n multiples
// of 8). Two kernels:
// - tc_gemm_kernel (sm_80 on): a block computes a BM x BN tile with (BM / WTM) x (BN / WTN)
//   warps, each a WTM x WTN piece as 16 x 8 tiles of `mma.sync.m16n8k16`. k advances in steps of
//   32 through a ring of kTcStages shared-memory stages filled by `cp.async` (16-byte copies,
//   zero-filled past the matrix edges). Fragments come from shared memory by `ldmatrix` (B's
//   with .trans: B is k-major in memory, the mma wants it column-major); rows are stored with
//   their 16-byte chunks permuted (XOR of the chunk index with row bits) so that the 8 rows one
//   ldmatrix reads fall in 8 different bank groups.
// - wgmma_gemm_kernel (sm_90a, Hopper): two warpgroups multiply a 128 x 128 tile by `wgmma`
//   straight from shared memory (below).
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

// Outputs (row, col) and (row, col + 1) of the product from their sums: through the epilogue
// (its loads read from the row's pointers rp, cpu::row_pointers) or as they are, rounded once
// to S and stored as one 4-byte word (col is even, n a multiple of 8).
template <class Desc, class Args, class S = typename Desc::value_type>
__device__ __forceinline__ void store_pair(const Args& g, index_t row, const S* const* rp, index_t col, float v0, float v1) {
  struct alignas(4) Pair {
    S v[2];
  };
  Pair p;
  const float v[2] = {v0, v1};
#pragma unroll
  for (int e = 0; e < 2; ++e) {
    float r = v[e];
    if constexpr (Desc::has_epilogue) {
      PreloadedEpilogue<S, Desc> pre;
      pre.load_in_row(g.epilogue, rp, col + e);
      r = pre.eval(r, col + e);
    }
    p.v[e] = narrow<S>(r);
  }
  S* out = Desc::has_epilogue ? g.epilogue.out : g.acc;
  *reinterpret_cast<Pair*>(out + row * g.n + col) = p;
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
      if constexpr (Desc::has_epilogue) cpu::row_pointers(g.epilogue, row, rp);
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        const index_t col = n0 + wn * WTN + j * 8 + (lane & 3) * 2;
        if (col < g.n) store_pair<Desc>(g, row, rp, col, acc[i][j][h * 2], acc[i][j][h * 2 + 1]);  // n even: col + 1 < n
      }
    }
#else
  __trap();  // mma.sync of 16-bit types needs sm_80: run_gemm uses cuBLASLt before it
#endif
}

// ---------------------------------------------------------------------------------------------
// Hopper (sm_90a): the same product by wgmma, two warpgroups per block, each multiplying its
// 64 rows of a 128 x 128 tile by k = 16 steps straight from shared memory (descriptors: no
// ldmatrix, no fragments in registers), asynchronously, so the next stage's copies and the
// multiplies overlap. Shared memory per stage: A's 128 x 64 tile K-major (a row of 64 values
// is one 128-byte line), B's 64 x 128 tile N-major as two 64-column halves of 64 x 128 bytes;
// both in the 128-byte swizzle (16-byte chunk c of line r stored at chunk c ^ (r mod 8), 1024-
// byte aligned atoms of 8 lines), which the descriptors name. Built only where nvcc targets
// sm_90a (wgmma is not in compute_90): KILN_CUDA_SM90A, set by CMake for CUDA architecture 90a.
namespace wg {

// A shared-memory matrix descriptor: start address, leading and stride byte offsets, 128-byte
// swizzle (PTX ISA, "Matrix Descriptor Format"; addresses and offsets in 16-byte units).
__device__ __forceinline__ std::uint64_t descriptor(std::uint32_t addr, std::uint32_t lead, std::uint32_t stride) {
  return std::uint64_t{(addr & 0x3FFFFu) >> 4} | (std::uint64_t{lead >> 4} << 16) | (std::uint64_t{stride >> 4} << 32) |
         (std::uint64_t{1} << 62);
}
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// d = A B + (accumulate ? d : 0): A 64 x 16 K-major (descriptor a), B 16 x 128 N-major
// (descriptor b, transposed);
// d is this thread's 64 of the warpgroup's 64 x 128 floats: value 4j + e at row 16 w + lane / 4
// (+ 8 for e >= 2) and column 8j + 2 (lane % 4) + e % 2, w the thread's warp in the group.
template <class S>
__device__ __forceinline__ void mma_64x128x16(float (&d)[64], std::uint64_t a, std::uint64_t b, int accumulate) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// One wgmma of 16-bit type T (f16 or bf16): the instruction names it twice.
#define KILN_WGMMA_64x128x16(T)                                                              \
  asm volatile(                                                                              \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"                                          \
      "wgmma.mma_async.sync.aligned.m64n128k16.f32." #T "." #T " {"                          \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63" \
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"                                                     \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]) \
      : "l"(a), "l"(b), "r"(accumulate))
  if constexpr (std::is_same_v<S, f16>) KILN_WGMMA_64x128x16(f16);
  else KILN_WGMMA_64x128x16(bf16);
#undef KILN_WGMMA_64x128x16
#else
  __trap();
#endif
}

}  // namespace wg

inline constexpr int kWgBK = 64;      // k per stage: one 128-byte line of A
inline constexpr int kWgStages = 3;   // a stage is refilled two steps after its multiplies were issued
inline constexpr std::uint32_t kWgStageBytes = (128 * kWgBK + kWgBK * 128) * 2;  // A's and B's tiles

// Two blocks per SM: 128 registers (ptxas: no spills), 97 KiB of shared memory each.
template <class Desc, class Args>
__global__ void __launch_bounds__(256, 2) wgmma_gemm_kernel(const Args g) {
  await_previous_kernel();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = typename Desc::value_type;
  constexpr int BM = 128, BN = 128, BK = kWgBK, Threads = 256, Stages = kWgStages;
  constexpr std::uint32_t StageA = BM * BK * 2, StageBytes = kWgStageBytes, HalfB = BK * 128;
  static_assert(Stages >= 3, "kiln: a stage is refilled two steps after its multiplies were issued");
  extern __shared__ unsigned char wg_smem[];
  const std::uint32_t base = (tc::smem_address(wg_smem) + 1023u) & ~1023u;  // swizzle atoms: 1024-byte aligned
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5, group = warp >> 2;
  const index_t m0 = static_cast<index_t>(blockIdx.y) * BM, n0 = static_cast<index_t>(blockIdx.x) * BN;
  const int steps = static_cast<int>((g.k + BK - 1) / BK);

  // Stage s <- step kt: A's 128 x 64 and B's 64 x 128 (zeros past m, n and k), swizzled.
  auto fill = [&](int s, int kt) {
    const std::uint32_t sa = base + static_cast<std::uint32_t>(s) * StageBytes, sb = sa + StageA;
    const index_t k0 = static_cast<index_t>(kt) * BK;
#pragma unroll
    for (int i = 0; i < BM * BK / 8 / Threads; ++i) {
      const int c = tid + i * Threads, r = c >> 3, ch = c & 7;
      const index_t row = m0 + r, kk = k0 + ch * 8;
      const bool in = row < g.m && kk < g.k;
      tc::copy16(sa + static_cast<std::uint32_t>(r * 128 + ((ch ^ (r & 7)) << 4)), in ? g.a.ptr + row * g.a.row + kk : g.a.ptr,
                 in ? 16 : 0);
    }
#pragma unroll
    for (int i = 0; i < BK * BN / 8 / Threads; ++i) {
      const int c = tid + i * Threads, r = c >> 4, ch = c & 15;
      const index_t kk = k0 + r, col = n0 + ch * 8;
      const bool in = kk < g.k && col < g.n;
      tc::copy16(sb + static_cast<std::uint32_t>((ch >> 3) * HalfB + r * 128 + (((ch & 7) ^ (r & 7)) << 4)),
                 in ? g.b.ptr + kk * g.b.row + col : g.b.ptr, in ? 16 : 0);
    }
  };

  // The accumulators are not zeroed: the first multiply overwrites them (accumulate 0). An
  // instruction writing them between wgmmas would make ptxas serialize the wgmmas.
  float acc[64];
#pragma unroll
  for (int s = 0; s < Stages - 2; ++s) {
    if (s < steps) fill(s, s);
    tc::commit();
  }
  for (int kt = 0; kt < steps; ++kt) {
    // Step kt's copies are done and visible to the tensor cores (the async proxy); the slot the
    // next fill overwrites was read by step kt - 2's multiplies, which every warpgroup has
    // waited for (wait<1> below, one step ago) before this barrier.
    tc::wait_pending<Stages - 3>();
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (kt + Stages - 2 < steps) fill((kt + Stages - 2) % Stages, kt + Stages - 2);
    tc::commit();
    const std::uint32_t sa = base + static_cast<std::uint32_t>(kt % Stages) * StageBytes, sb = sa + StageA;
    wg::fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
      wg::mma_64x128x16<S>(acc, wg::descriptor(sa + static_cast<std::uint32_t>(group * 64 * 128 + kk * 32), 16, 1024),
                           wg::descriptor(sb + static_cast<std::uint32_t>(kk * 16 * 128), HalfB, 1024), kt > 0 || kk > 0);
    wg::commit();
    wg::wait<1>();
  }
  wg::wait<0>();
  tc::wait_pending<0>();

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const index_t row = m0 + group * 64 + (warp & 3) * 16 + (lane >> 2) + h * 8;
    if (row >= g.m) continue;
    const S* rp[Desc::nloads > 0 ? Desc::nloads : 1];
    if constexpr (Desc::has_epilogue) cpu::row_pointers(g.epilogue, row, rp);
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
      const index_t col = n0 + j * 8 + (lane & 3) * 2;
      if (col < g.n) store_pair<Desc>(g, row, rp, col, acc[j * 4 + h * 2], acc[j * 4 + h * 2 + 1]);  // n even: col + 1 < n
    }
  }
#else
  __trap();  // wgmma needs sm_90a code: run_gemm offers this kernel only where KILN_CUDA_SM90A says it was built so
#endif
}

// A kernel launched with more than 48 KiB of dynamic shared memory must opt in, once per device.
template <auto Kernel>
void allow_dynamic_smem(std::size_t bytes) {
  thread_local std::unordered_map<int, bool> opted;
  const int device = current_device();
  if (!opted[device]) {
    KILN_CUDA_CHECK(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    opted[device] = true;
  }
}

template <class Desc>
struct TcGemmCuda;
template <class T, class Epi, int AccSlot, int NL, int NC>
struct TcGemmCuda<lower::GemmKernel<T, Epi, AccSlot, NL, NC>> {
  using Desc = lower::GemmKernel<T, Epi, AccSlot, NL, NC>;
  using Args = cpu::GemmArgs<T, NL, NC>;
  template <int BM, int BN, int WTM, int WTN>
  static void launch_shape(const Args& g, cudaStream_t stream) {
    constexpr auto kernel = &tc_gemm_kernel<Desc, BM, BN, WTM, WTN, Args>;
    constexpr std::size_t smem = tc_smem_bytes<BM, BN>;
    // mma.sync of 16-bit types needs code for sm_80 on (run through its PTX on a newer device,
    // code for an older one would reach the __trap): say so instead.
    static const int arch = code_arch(kernel);
    if (arch < 80)
      throw DeviceError("matmul on cuda: the tensor-core kernel was built for compute_" + std::to_string(arch) +
                        "; it needs sm_80 code or later (build with CMAKE_CUDA_ARCHITECTURES 90)");
    allow_dynamic_smem<kernel>(smem);
    const dim3 blocks(static_cast<unsigned>((g.n + BN - 1) / BN), static_cast<unsigned>((g.m + BM - 1) / BM));
    launch_after_previous<kernel>(blocks, dim3((BM / WTM) * (BN / WTN) * 32), smem, stream, g);
  }
  // Hopper's wgmma kernel: 128 x 128 tiles, two warpgroups, three stages of k = 64 (and 1 KiB
  // to align the first to the swizzle's 1024 bytes). Three stages (97 KiB) and the launch
  // bounds' 128 registers (ptxas: no spills) let two blocks share an SM: W4's products at
  // B = 4096 take 0.072 / 0.062 ms so, against 0.093 / 0.069 with four stages and 138 registers,
  // one block per SM (MaxAutotune's graph-timed figures, eleventh session).
  static void launch_wgmma(const Args& g, cudaStream_t stream) {
    constexpr auto kernel = &wgmma_gemm_kernel<Desc, Args>;
    constexpr std::size_t smem = std::size_t{kWgStages} * kWgStageBytes + 1024;
    allow_dynamic_smem<kernel>(smem);
    const dim3 blocks(static_cast<unsigned>((g.n + 127) / 128), static_cast<unsigned>((g.m + 127) / 128));
    launch_after_previous<kernel>(blocks, dim3(256), smem, stream, g);
  }
  static void run(const Args& g, const cpu::LaunchConfig& cfg, cudaStream_t stream, void* = nullptr) {
    static_assert(sizeof(T) == 2, "kiln: the tensor-core kernel takes bf16 and f16 (run_gemm launches it for those only)");
    switch (cfg.chunks) {
      case 1: launch_shape<64, 64, 32, 32>(g, stream); break;
#if defined(KILN_CUDA_SM90A)
      case kTcWgmma: launch_wgmma(g, stream); break;
#endif
      default: launch_shape<128, 128, 64, 64>(g, stream);
    }
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
