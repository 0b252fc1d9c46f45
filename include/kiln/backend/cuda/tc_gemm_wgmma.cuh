// kiln: kiln's Hopper tensor-core GEMM kernel (sm_90a): wgmma fed by TMA, warp-specialized and
// persistent, with the epilogue fused (tc_gemm.cuh has the overview).
#pragma once
#include <cstdint>

#include <cudaTypedefs.h>  // CUtensorMap and the driver function's type (no link to libcuda)

#include "kiln/backend/cuda/tc_gemm_mma.cuh"

namespace kiln::cuda {

// ---------------------------------------------------------------------------------------------
// Hopper (sm_90a): wgmma multiplies 64 rows by k = 16 straight from shared memory
// (descriptors: no ldmatrix, no fragments in registers), asynchronously. Shared memory per
// stage: A's 128 x 64 tile K-major (a row of 64 values is one 128-byte line), B's 64 x 128 tile
// N-major as two 64-column halves of 64 x 128 bytes; both in the 128-byte swizzle (16-byte chunk
// c of line r stored at chunk c ^ (r mod 8), 1024-byte aligned atoms of 8 lines), which the
// descriptors name and TMA writes. Built only where nvcc targets sm_90a (wgmma, setmaxnreg are
// not in compute_90): KILN_CUDA_SM90A, set by CMake for CUDA architecture 90a.
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

inline constexpr int kWgBK = 64;  // k per stage: one 128-byte line of A

// ---------------------------------------------------------------------------------------------
// Hopper (sm_90a), warp-specialized and persistent ("ping-pong"): a block per SM, one producer
// warpgroup and two consumer warpgroups. The block takes the tiles blockIdx.x, blockIdx.x +
// gridDim.x, ... of 128 x 128; consumer c computes its tiles j = c, c + 2, ... whole, so that one
// consumer's epilogue runs while the other's multiplies keep the tensor cores busy (the epilogue
// of an exact gelu costs as much as the main loop, by ncu). The producer's first
// thread loads each k step by TMA (A's 128 x 64 box, B's two 64 x 64 boxes; the tensor maps'
// 128-byte swizzle is the layout the wgmma descriptors name) into a ring of kTmaStages stages
// guarded by mbarriers: full[s] completes when the stage's bytes have landed (expect_tx),
// empty[s] when its consumer's multiplies of it are done. Steps are numbered across the block's
// tiles (tile j's step kt is step j * steps + kt), which fixes each step's stage and phase for
// producer and consumers alike. The consumers only wait and issue wgmmas (two m64n128k16 per
// k = 16 step, one per 64-row half): no block barrier, no address arithmetic, no copies in their
// loop. The producer gives registers back (setmaxnreg) to the consumers' accumulators.
// The consumers take turns (two more mbarriers, turn[c]: the other consumer has waited for all
// of its previous tile's stages): a barrier's wait names only the parity of the phase it waits
// for, so a consumer must not wait for a stage's use u before its use u - 1 has completed, and
// that use may belong to the other consumer's previous tile. Without the turns the second
// consumer read stages a phase early and the kernel hung.
namespace wg {

__device__ __forceinline__ void mbar_init(std::uint32_t bar, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// One arrival that also announces `bytes` of transactions (the stage's TMA loads) to come.
__device__ __forceinline__ void mbar_expect_bytes(std::uint32_t bar, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Until the barrier's phase of this parity has completed (a fresh barrier is in phase 0; the
// phase before it, of parity 1, counts as complete).
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// The box at (c0, c1) (innermost coordinate first) of the tensor map's matrix into shared memory
// at dst, completing `bytes` of the barrier's transactions; zeros where the box passes the edges.
__device__ __forceinline__ void tma_load(std::uint32_t dst, const CUtensorMap* map, int c0, int c1, std::uint32_t bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
               "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}

}  // namespace wg

inline constexpr int kTmaStages = 6;
inline constexpr std::uint32_t kTmaStageA = 128 * kWgBK * 2, kTmaStageBytes = kTmaStageA + kWgBK * 128 * 2;  // 32 KiB
// Each consumer's epilogue stages a quarter of its tile (32 rows x 128 float sums) here.
inline constexpr std::uint32_t kTmaQuarterBytes = 32 * 128 * 4;
inline constexpr std::size_t kTmaSmemBytes =
    std::size_t{kTmaStages} * kTmaStageBytes + 2 * kTmaQuarterBytes + 1024 + (2 * kTmaStages + 2) * 8;
static_assert(kTmaSmemBytes <= 227 * 1024, "kiln: the TMA GEMM kernel's shared memory exceeds what a Hopper block can have");

namespace wg {
// The named barrier `id` of `threads` threads (0 is __syncthreads'): one consumer warpgroup's.
__device__ __forceinline__ void sync_named(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
}  // namespace wg

// The staged epilogue of one quarter of a consumer's tile: 32 rows (staged row sr is tile row
// row_of(sr)) of 128 sums in shared memory, each row's 8-column blocks rotated by sr mod 4
// blocks so that the accumulators' 8-byte writes meet no bank twice. 16 threads a row, 8
// columns each: every epilogue input of the 8 loaded first, then computed, rounded once and
// stored as one 16-byte word. A rolled loop (4 rows a thread): unrolled over the tile, the
// epilogue's code (5400 instructions a warp for an exact gelu) missed the instruction cache
// and ran at 0.16 instructions a cycle (ncu).
template <class Desc, class Args, class RowOf>
__device__ __forceinline__ void tma_epilogue_quarter(const Args& g, const float* stage, int t, int n0, RowOf row_of) {
  using S = typename Desc::value_type;
  const int col_block = t & 15;
  const index_t col = n0 + 8 * col_block;
#pragma unroll 1
  for (int sr = t >> 4; sr < 32; sr += 8) {
    const index_t row = row_of(sr);
    if (row >= g.m || col >= g.n) continue;  // n a multiple of 8: the block is whole
    const float* src = stage + sr * 128 + ((8 * col_block + 8 * (sr & 3)) & 127);
    const float4 lo = *reinterpret_cast<const float4*>(src), hi = *reinterpret_cast<const float4*>(src + 4);
    const float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    struct alignas(16) Eight {
      S v[8];
    } out;
    if constexpr (Desc::has_epilogue) {
      const S* rp[Desc::nloads > 0 ? Desc::nloads : 1];
      lower::row_pointers(g.epilogue, row, rp);
      PreloadedEpilogue<S, Desc> pre[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) pre[e].load_in_row(g.epilogue, rp, col + e);
#pragma unroll
      for (int e = 0; e < 8; ++e) out.v[e] = narrow<S>(pre[e].eval(v[e], col + e));
      *reinterpret_cast<Eight*>(g.epilogue.out + row * g.n + col) = out;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) out.v[e] = narrow<S>(v[e]);
      *reinterpret_cast<Eight*>(g.acc + row * g.n + col) = out;
    }
  }
}

// One block per SM (225 KiB of shared memory): 384 threads, the consumers at up to 232 registers
// (ptxas allots 168 without spills).
template <class Desc, class Args>
__global__ void __launch_bounds__(384, 1)
    wgmma_tma_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, const Args g) {
  await_previous_kernel();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = typename Desc::value_type;
  constexpr int BM = 128, BN = 128, BK = kWgBK, Stages = kTmaStages;
  constexpr std::uint32_t HalfB = BK * 64 * 2;  // one 64-column box of B: 64 lines of 128 bytes
  extern __shared__ unsigned char wg_smem[];
  const std::uint32_t base = (tc::smem_address(wg_smem) + 1023u) & ~1023u;  // swizzle atoms: 1024-byte aligned
  const std::uint32_t quarters = base + Stages * kTmaStageBytes;  // the consumers' staged epilogues
  const std::uint32_t full = quarters + 2 * kTmaQuarterBytes, empty = full + Stages * 8, turn = empty + Stages * 8;  // 8-byte mbarriers
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5, group = warp >> 2;
  const int tiles_n = static_cast<int>((g.n + BN - 1) / BN), tiles = tiles_n * static_cast<int>((g.m + BM - 1) / BM);
  const int mine = (tiles - static_cast<int>(blockIdx.x) + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int steps = static_cast<int>((g.k + BK - 1) / BK);
  const auto tile_origin = [&](int j, int& m0, int& n0) {  // this block's tile j
    const int t = static_cast<int>(blockIdx.x) + j * static_cast<int>(gridDim.x);
    m0 = t / tiles_n * BM, n0 = t % tiles_n * BN;
  };
  if (tid == 0) {
    for (int s = 0; s < Stages; ++s) {
      wg::mbar_init(full + 8 * s, 1);   // the producer's arrival (with the stage's bytes)
      wg::mbar_init(empty + 8 * s, 1);  // the consumer's arrival
    }
    wg::mbar_init(turn, 1), wg::mbar_init(turn + 8, 1);  // the other consumer's arrival
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (group == 0) {  // the producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;" ::: "memory");
    if (tid == 0) {
      int it = 0;
      for (int j = 0; j < mine; ++j) {
        int m0, n0;
        tile_origin(j, m0, n0);
        for (int kt = 0; kt < steps; ++kt, ++it) {
          const int s = it % Stages, use = it / Stages;
          if (use > 0) wg::mbar_wait(empty + 8 * s, (use - 1) & 1);  // its consumer is done with its last use
          const std::uint32_t sa = base + static_cast<std::uint32_t>(s) * kTmaStageBytes, sb = sa + kTmaStageA;
          wg::mbar_expect_bytes(full + 8 * s, kTmaStageBytes);  // the boxes' full bytes, zeros past the edges included
          wg::tma_load(sa, &map_a, kt * BK, m0, full + 8 * s);
          wg::tma_load(sb, &map_b, n0, kt * BK, full + 8 * s);
          wg::tma_load(sb + HalfB, &map_b, n0 + 64, kt * BK, full + 8 * s);
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;" ::: "memory");
  const int c = group - 1;
  for (int j = c; j < mine; j += 2) {
    int m0, n0;
    tile_origin(j, m0, n0);
    // Tile j - 1's stages have all been waited for: turn[c]'s phase (j - 1) / 2 (tile 0 waits
    // for nothing).
    if (j > 0) wg::mbar_wait(turn + 8 * c, ((j - 1) / 2) & 1);
    // The tile's two 64-row halves. Not zeroed: the tile's first multiply overwrites them
    // (accumulate 0); an instruction writing them between wgmmas makes ptxas serialize the
    // wgmmas (its warning C7515).
    float acc[2][64];
    int it = j * steps;
    for (int kt = 0; kt < steps; ++kt, ++it) {
      const int s = it % Stages;
      wg::mbar_wait(full + 8 * s, (it / Stages) & 1);
      const std::uint32_t sa = base + static_cast<std::uint32_t>(s) * kTmaStageBytes, sb = sa + kTmaStageA;
      wg::fence();
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        const std::uint64_t b = wg::descriptor(sb + static_cast<std::uint32_t>(kk * 16 * 128), HalfB, 1024);
#pragma unroll
        for (int h = 0; h < 2; ++h)
          wg::mma_64x128x16<S>(acc[h], wg::descriptor(sa + static_cast<std::uint32_t>(h * 64 * 128 + kk * 32), 16, 1024), b,
                               kt > 0 || kk > 0);
      }
      wg::commit();
      wg::wait<1>();  // step it - 1's multiplies are done: its stage can be refilled
      if (kt > 0 && (tid & 127) == 0) wg::mbar_arrive(empty + 8 * ((it - 1) % Stages));
    }
    wg::wait<0>();
    if ((tid & 127) == 0) {
      wg::mbar_arrive(empty + 8 * ((it - 1) % Stages));
      wg::mbar_arrive(turn + 8 * (1 - c));  // the other consumer's tile j + 1 may start
    }

    // The epilogue, a quarter of the tile at a time: quarter (h, r) holds this thread's sums of
    // tile row h 64 + 16 w + lane / 4 + 8 r (w its warp in the group) as staged row
    // 8 w + lane / 4, column 8 j + 2 (lane % 4) + e being sum j of the 16 (acc[h][4 j + 2 r + e]).
    float* stage = reinterpret_cast<float*>(wg_smem + (quarters - tc::smem_address(wg_smem)) + c * kTmaQuarterBytes);
    const int t = tid & 127, sr = (warp & 3) * 8 + (lane >> 2);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        wg::sync_named(1 + c, 128);  // the previous quarter's reads are done
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
          *reinterpret_cast<float2*>(stage + sr * 128 + ((8 * jj + 8 * (sr & 3)) & 127) + 2 * (lane & 3)) =
              make_float2(acc[h][jj * 4 + r * 2], acc[h][jj * 4 + r * 2 + 1]);
        wg::sync_named(1 + c, 128);
        tma_epilogue_quarter<Desc>(g, stage, t, n0, [&](int q) { return index_t{m0} + h * 64 + (q >> 3) * 16 + r * 8 + (q & 7); });
      }
  }
#else
  __trap();  // wgmma needs sm_90a code: run_gemm offers this kernel only where KILN_CUDA_SM90A says it was built so
#endif
}

// The driver's cuTensorMapEncodeTiled, found through the runtime (no link to libcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    KILN_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      throw CudaError("cudaGetDriverEntryPointByVersion(\"cuTensorMapEncodeTiled\") found no such driver function");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}
// A row-major matrix of 16-bit values (rows x cols, `stride` values between rows) as TMA boxes
// of box_rows x 64 (one 128-byte line a row), 128-byte swizzled.
template <class S>
CUtensorMap tensor_map(const S* ptr, index_t rows, index_t cols, index_t stride, unsigned box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(stride) * sizeof(S)};
  const cuuint32_t box[2] = {64, box_rows}, unit[2] = {1, 1};
  const CUresult r = tensor_map_encoder()(&map, std::is_same_v<S, f16> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                          2, const_cast<S*>(ptr), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                          CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw CudaError("cuTensorMapEncodeTiled failed (CUresult " + std::to_string(static_cast<int>(r)) + ") for a " +
                        std::to_string(rows) + " x " + std::to_string(cols) + " matrix, row stride " + std::to_string(stride),
                    static_cast<int>(r));
  return map;
}

}  // namespace kiln::cuda
