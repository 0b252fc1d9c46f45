// kiln: GEMM + epilogue on tensor cores, kiln's own kernels, for 16-bit operands (bf16, f16)
// with float accumulation: the epilogue is applied to the float sums before they are rounded
// and stored, so an epilogue cuBLASLt cannot express (an exact gelu, a residual add) costs no
// pass over the product. MaxAutotune times them against cuBLASLt and its row pass
// (gemm_candidates); the default is cuBLASLt (docs/design-decisions.md has the figures).
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
// - wgmma_tma_gemm_kernel (sm_90a, Hopper): persistent, warp-specialized; a producer warpgroup
//   loads the operands by TMA, two consumer warpgroups take turns multiplying 128 x 128 tiles
//   by `wgmma` straight from shared memory and applying the epilogue (below).
//
// This file launches them (TcGemmCuda); the kernels are in tc_gemm_mma.cuh and tc_gemm_wgmma.cuh.
#pragma once
#include "kiln/backend/cuda/tc_gemm_wgmma.cuh"

namespace kiln::cuda {

template <class Desc>
struct TcGemmCuda;
template <class T, class Epi, int AccSlot, int NL, int NC>
struct TcGemmCuda<lower::GemmKernel<T, Epi, AccSlot, NL, NC>> {
  using Desc = lower::GemmKernel<T, Epi, AccSlot, NL, NC>;
  using Args = lower::GemmArgs<T, NL, NC>;
  template <int BM, int BN, int WTM, int WTN>
  static void launch_shape(const Args& g, cudaStream_t stream) {
    constexpr auto kernel = &tc_gemm_kernel<Desc, BM, BN, WTM, WTN, Args>;
    constexpr std::size_t smem = tc_smem_bytes<BM, BN>;
    // mma.sync of 16-bit types needs code for sm_80 on (run through its PTX on a newer device,
    // code for an older one would reach the __trap): say so instead.
    const int arch = kernel_attributes<kernel>().ptxVersion;
    if (arch < 80)
      throw DeviceError("matmul on cuda: the tensor-core kernel was built for compute_" + std::to_string(arch) +
                        "; it needs sm_80 code or later (build with CMAKE_CUDA_ARCHITECTURES 90)");
    allow_dynamic_smem<kernel>(smem);
    const dim3 blocks(static_cast<unsigned>((g.n + BN - 1) / BN), static_cast<unsigned>((g.m + BM - 1) / BM));
    launch_after_previous<kernel>(blocks, dim3((BM / WTM) * (BN / WTN) * 32), smem, stream, g);
  }
  // The warp-specialized TMA kernel: 128 x 128 tiles, one block per SM, as many blocks as
  // SMs (or tiles).
  static void launch_wgmma_tma(const Args& g, cudaStream_t stream) {
    constexpr auto kernel = &wgmma_tma_gemm_kernel<Desc, Args>;
    allow_dynamic_smem<kernel>(kTmaSmemBytes);
    const CUtensorMap a = tensor_map(g.a.ptr, g.m, g.k, g.a.row, 128), b = tensor_map(g.b.ptr, g.k, g.n, g.b.row, 64);
    const index_t tiles = ((g.n + 127) / 128) * ((g.m + 127) / 128);
    const dim3 blocks(static_cast<unsigned>(std::min<index_t>(tiles, multiprocessors())));
    launch_after_previous<kernel>(blocks, dim3(384), kTmaSmemBytes, stream, a, b, g);
  }
  static void run(const Args& g, const lower::LaunchConfig& cfg, cudaStream_t stream, void* = nullptr) {
    static_assert(sizeof(T) == 2, "kiln: the tensor-core kernel takes bf16 and f16 (run_gemm launches it for those only)");
    switch (cfg.chunks) {
#if defined(KILN_CUDA_SM90A)
      case kTcWgmmaTma: launch_wgmma_tma(g, stream); break;
#endif
      default: launch_shape<64, 64, 32, 32>(g, stream);  // kTcMma
    }
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
