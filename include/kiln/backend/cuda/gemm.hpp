// kiln: GEMM + epilogue on CUDA (host code: any C++ compiler builds it).
//
// The product goes through cuBLASLt: f32 with f32 compute (no TF32), bf16 and f16 with f32
// accumulation and a 16-bit result, f64. Then the epilogue, when the kernel has one, runs as
// cuBLASLt's own where its recipe is one of them (lower/epilogue.hpp), else as the row kernel
// over the result (in place when the result has the output's shape). Transposed operands are read in place (cuBLASLt's op T); a
// broadcast operand has batch stride 0. Products too small for cuBLASLt to fill the GPU go to
// small_gemm.cuh instead (small_gemm_applies).
//
// Row-major C = A B is column-major C^T = B^T A^T, so cuBLASLt's "A" is kiln's B and its "B"
// is kiln's A. An operand with its last stride 1 is row-major (op N in that view); one with
// its row stride 1 is a transposed view (op T).
#pragma once
#include <cublasLt.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/lower/args.hpp"
#include "kiln/lower/epilogue.hpp"
#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/runtime.hpp"

#define KILN_CUBLAS_CHECK(call) ::kiln::cuda::check_cublas((call), #call, __FILE__, __LINE__)

namespace kiln::cuda {

inline void check_cublas(cublasStatus_t s, const char* call, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(std::string(call) + " failed: cuBLAS status " + std::to_string(static_cast<int>(s)) + " at " + file +
                  ":" + std::to_string(line));
}

inline constexpr std::size_t kLtWorkspace = std::size_t{32} << 20;

// One cuBLASLt handle and workspace per device, created at first use.
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  Buffer workspace;
  static LtContext& get() {
    thread_local std::unordered_map<int, std::unique_ptr<LtContext>> per_device;
    const int d = current_device();
    auto& c = per_device[d];
    if (!c) {
      c = std::make_unique<LtContext>();
      KILN_CUBLAS_CHECK(cublasLtCreate(&c->handle));
      c->workspace = Buffer(kLtWorkspace, d);
    }
    return *c;
  }
  LtContext() = default;
  LtContext(const LtContext&) = delete;
  ~LtContext() {
    if (handle) cublasLtDestroy(handle);
  }
};

template <class T>
struct LtTypes;
// Operands, result, and the accumulation: float for the 16-bit types (alpha and beta are then
// floats too: the scale type is the compute type).
template <>
struct LtTypes<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;  // no TF32
};
template <>
struct LtTypes<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F, scale = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
};
template <>
struct LtTypes<bf16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};
template <>
struct LtTypes<f16> {
  static constexpr cudaDataType_t data = CUDA_R_16F, scale = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

// cuBLASLt's own epilogues, per device-neutral recipe (lower/epilogue.hpp): acc + bias (BIAS),
// relu(acc + bias) (RELU_BIAS) and gelu_tanh(acc + bias) (GELU_BIAS: cuBLASLt's GELU is the
// tanh form, x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); kiln::gelu, the exact form, is not
// one of them). DEFAULT: the epilogue runs as kiln's.
inline constexpr cublasLtEpilogue_t lt_epilogue(lower::EpilogueKind k) {
  switch (k) {
    case lower::EpilogueKind::Add: return CUBLASLT_EPILOGUE_BIAS;
    case lower::EpilogueKind::AddRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case lower::EpilogueKind::AddGeluTanh: return CUBLASLT_EPILOGUE_GELU_BIAS;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
  }
}
template <class Desc>
inline constexpr cublasLtEpilogue_t lt_epilogue_of = lt_epilogue(lower::gemm_recipe<Desc>::kind);

// The load slot cuBLASLt reads as its bias vector, or -1 when the epilogue runs as kiln's: the
// kernel's epilogue is one of cuBLASLt's and its added operand is a row bias for these shapes.
template <class Desc, class G>
int lt_bias_slot(const G& g) {
  if constexpr (lt_epilogue_of<Desc> == CUBLASLT_EPILOGUE_DEFAULT) return -1;
  else return lower::add_is_row_bias<Desc>(g) ? lower::gemm_recipe<Desc>::operand : -1;
}

// The cuBLASLt descriptors of one GEMM shape, and the algorithms its heuristic offers.
struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulHeuristicResult_t algos[8] = {};
  int nalgos = 0;
  int bias_slot = -1;  // cuBLASLt applies the epilogue (BIAS, RELU_BIAS or GELU_BIAS), reading this load
  bool bias_grad = false;  // cuBLASLt's BGRADA: it also writes B's column sums (run_gemm's bias_grad_out)
  GemmPlan() = default;
  GemmPlan(const GemmPlan&) = delete;
  GemmPlan& operator=(const GemmPlan&) = delete;
  ~GemmPlan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

template <class T>
cublasLtMatrixLayout_t lt_layout(std::uint64_t rows, std::uint64_t cols, std::int64_t ld, int batch, std::int64_t batch_stride) {
  cublasLtMatrixLayout_t l;
  KILN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, LtTypes<T>::data, rows, cols, std::max<std::int64_t>(ld, std::max<std::int64_t>(rows, 1))));
  if (batch > 1) {
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
    KILN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride, sizeof batch_stride));
  }
  return l;
}

// The layout of kiln operand v (rows x cols, row-major, possibly a transposed view) as the
// column-major cols x rows matrix cuBLASLt reads: op N for a row-major v (last stride 1), op T
// for a transposed view (row stride 1).
template <class T>
cublasOperation_t operand_layout(const lower::MatrixView<T>& v, std::uint64_t cols, std::uint64_t rows, int batch,
                                 const char* side, cublasLtMatrixLayout_t& layout) {
  if (v.col == 1) {
    layout = lt_layout<T>(cols, rows, v.row, batch, v.batch);
    return CUBLAS_OP_N;
  }
  if (v.row == 1) {
    layout = lt_layout<T>(rows, cols, v.col, batch, v.batch);
    return CUBLAS_OP_T;
  }
  throw DeviceError(std::string("matmul on cuda: the ") + side + " operand has no unit stride (strides " +
                    std::to_string(v.row) + ", " + std::to_string(v.col) + "); make it contiguous first");
}

// The largest power of two up to 64 that divides every matrix start of an operand: its
// buffer's start (64-byte aligned at least) plus multiples of its batch stride.
template <class T>
std::uint32_t operand_alignment(index_t batch_stride, int batch) {
  std::uint32_t align = 64;
  const auto stride_bytes = static_cast<std::uint64_t>(batch_stride) * sizeof(T);
  if (batch > 1 && stride_bytes > 0)
    while (stride_bytes % align != 0) align /= 2;
  return align;
}

// A product with few output tiles and a long k (a weight gradient x^T dz of a narrow layer over
// thousands of rows: [128, 2048] x [2048, 114]) keeps a handful of SMs busy unless k is split;
// cuBLASLt's first heuristic answer for that f32 shape on the H200 took 0.48 ms (kiln's
// profile of the char-GPT's head, train_gpt --profile): about what one SM looping over all of k
// takes. So where the 128 x 128 tiles would fill under a quarter of the SMs and k is at least
// 1024, the first algorithm that can split k is put first, split into as many parts as fill the
// SMs (at most 16, each part at least 256 of k), its parts summed by cuBLASLt in the compute
// type in the workspace (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE: a second, fixed-order pass, so
// the result does not depend on timing). It is kept only where cuBLASLt accepts it
// (cublasLtMatmulAlgoCheck); MaxAutotune times it beside the heuristic's own answers.
inline void prefer_split_k(GemmPlan& p, std::uint64_t m, std::uint64_t n, std::uint64_t k, int batch) {
  const auto tiles = static_cast<std::int64_t>(((m + 127) / 128) * ((n + 127) / 128)) * batch;
  const std::int64_t sms = multiprocessors();
  if (k < 1024 || tiles * 4 > sms || p.nalgos == 0) return;
  const auto parts = static_cast<std::int32_t>(std::clamp<std::int64_t>(
      std::min<std::int64_t>(sms / tiles, static_cast<std::int64_t>(k / 256)), 2, 16));
  for (int i = 0; i < p.nalgos; ++i) {
    std::int32_t can_split = 0, current = 1;
    std::uint32_t schemes = 0;
    std::size_t got = 0;
    cublasLtMatmulAlgo_t algo = p.algos[i].algo;
    if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_SPLITK_SUPPORT, &can_split, sizeof can_split, &got) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes, &got) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigGetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &current, sizeof current, &got) !=
            CUBLAS_STATUS_SUCCESS)
      continue;
    if (current > 1) return;  // a split algorithm is on the list already: the caller's choice stands
    if (!can_split || !(schemes & CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE)) continue;
    const std::uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    cublasLtMatmulHeuristicResult_t checked{};
    if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &parts, sizeof parts) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoCheck(LtContext::get().handle, p.op, p.la, p.lb, p.lc, p.lc, &algo, &checked) !=
            CUBLAS_STATUS_SUCCESS ||
        checked.workspaceSize > kLtWorkspace)
      continue;
    checked.algo = algo;
    const int n_kept = std::min(p.nalgos + 1, 8);
    for (int j = n_kept - 1; j > 0; --j) p.algos[j] = p.algos[j - 1];
    p.algos[0] = checked;
    p.nalgos = n_kept;
    return;
  }
}

// What cuBLASLt offered for a product, for explain(): how many algorithms its heuristic gave,
// which one runs by default (its id) and into how many parts it splits k, and how many of the
// others split k.
inline std::string describe(const GemmPlan& p) {
  const auto config = [](const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t a) {
    std::int32_t v = 0;
    std::size_t got = 0;
    return cublasLtMatmulAlgoConfigGetAttribute(&algo, a, &v, sizeof v, &got) == CUBLAS_STATUS_SUCCESS ? v : -1;
  };
  if (p.nalgos == 0) return "cuBLASLt: no algorithm";
  int splitting = 0;
  for (int i = 1; i < p.nalgos; ++i) splitting += config(p.algos[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) > 1;
  return "cuBLASLt: " + std::to_string(p.nalgos) + " algorithms; the default, id " +
         std::to_string(config(p.algos[0].algo, CUBLASLT_ALGO_CONFIG_ID)) + ", splits k into " +
         std::to_string(std::max(1, config(p.algos[0].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM))) + "; " +
         std::to_string(splitting) + " of the others split k" + (p.bias_grad ? "; with BGRADA" : "");
}

// Builds the descriptors for g's shape and strides (pointers are set at launch); none for an
// empty product (a zero batch, m, n or k), which run_gemm handles without cuBLASLt.
// bias_grad: with cuBLASLt's BGRADA epilogue, which also writes kiln's B summed over its rows
// (cuBLASLt's A, n x k, summed over k: the bias gradient beside a weight gradient x^T dz);
// none where cuBLASLt offers no algorithm for it (on the H200 it offers none for a transposed
// B, op T), and the caller sums B apart.
template <class Desc, class G>
std::unique_ptr<GemmPlan> make_gemm_plan(const G& g, bool bias_grad = false) {
  using T = typename Desc::value_type;
  if (g.batch == 0 || g.m == 0 || g.n == 0 || g.k == 0) return nullptr;
  auto p = std::make_unique<GemmPlan>();
  const auto m = static_cast<std::uint64_t>(g.m), n = static_cast<std::uint64_t>(g.n), k = static_cast<std::uint64_t>(g.k);
  const int batch = static_cast<int>(g.batch);
  // cuBLASLt's A: kiln's B^T (n x k); its B: kiln's A^T (k x m).
  const cublasOperation_t ta = operand_layout<T>(g.b, n, k, batch, "right", p->la);
  const cublasOperation_t tb = operand_layout<T>(g.a, k, m, batch, "left", p->lb);
  p->lc = lt_layout<T>(n, m, static_cast<std::int64_t>(n), batch, static_cast<std::int64_t>(m * n));
  KILN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->op, LtTypes<T>::compute, LtTypes<T>::scale));
  KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  if (bias_grad) {  // the bias-gradient pointer is set at each launch
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BGRADA;
    KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    p->bias_grad = true;
  } else if constexpr (Desc::has_epilogue) {
    p->bias_slot = lt_bias_slot<Desc>(g);
    if (p->bias_slot >= 0) {  // the bias pointer is set at each launch
      const cublasLtEpilogue_t epi = lt_epilogue_of<Desc>;
      KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    }
  }
  cublasLtMatmulPreference_t pref;
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const std::size_t ws = kLtWorkspace;
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  // The alignment the operands are known to have (cuBLASLt assumes 256 bytes unless told):
  // buffers start at 64 bytes or more (arena offsets, allocator blocks); each matrix of a batch
  // starts at a multiple of its batch stride.
  const std::uint32_t align_a = operand_alignment<T>(g.b.batch, batch), align_b = operand_alignment<T>(g.a.batch, batch),
                      align_c = operand_alignment<T>(static_cast<index_t>(m * n), batch);
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c));
  KILN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c));
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(LtContext::get().handle, p->op, p->la, p->lb, p->lc, p->lc, pref,
                                                           8, p->algos, &p->nalgos);
  cublasLtMatmulPreferenceDestroy(pref);
  // Without BGRADA the sum runs as its own kernel: any refusal (confirmed on the H200 for f32 and
  // bf16 only; f16, f64 and other GPUs may answer otherwise) falls back, none throws.
  if (bias_grad && (st != CUBLAS_STATUS_SUCCESS || p->nalgos == 0)) return nullptr;
  KILN_CUBLAS_CHECK(st);
  if (p->nalgos == 0)
    throw CudaError("cublasLtMatmulAlgoGetHeuristic found no algorithm for a " + std::to_string(batch) + " x " +
                    std::to_string(m) + "x" + std::to_string(k) + " by " + std::to_string(k) + "x" + std::to_string(n) +
                    " product");
  if (!bias_grad) prefer_split_k(*p, m, n, k, batch);
  return p;
}

// The small-product kernel (small_gemm.cuh): for at most 4 rows of A (one matrix), B row-major
// with rows of whole 16-byte vectors, and an epilogue, if any, over the product's own rows.
inline constexpr index_t kSmallGemmRows = 4;
inline constexpr int kSmallGemmVector = 4;       // columns per lane
inline constexpr int kSmallGemmWarps = 8;        // per block
// Rows of B a thread loads per round, all before its multiplies: 12 (48 registers of f32
// vectors) lets a one-row kernel fit the 80 registers its launch bounds allow, so three blocks
// fit on an SM (small_gemm_kernel). 16 took 116 registers: two blocks per SM.
inline constexpr int kSmallGemmLoads = 12;
inline constexpr int kSmallGemmMaxSplits = 8;    // splits of k: the blocks of one cluster (the portable maximum)
inline constexpr index_t kSmallGemmBlocks = 192; // blocks to aim for (132 SMs on an H200)

template <class G>
bool small_gemm_applies(const G& g, bool has_epilogue) {
  using S = std::remove_cvref_t<decltype(*g.acc)>;
  constexpr index_t V = kSmallGemmVector;
  if (sizeof(S) > 4 || g.batch != 1 || g.m < 1 || g.m > kSmallGemmRows || g.n < 1 || g.k < 1) return false;
  if (g.b.col != 1 || g.b.row % V != 0 || g.n % V != 0) return false;
  return !has_epilogue || (g.in_place && g.epilogue.rows == g.m && g.epilogue.len == g.n);
}

// Its grid: column tiles x splits of k. A warp's lanes cover `lanes` columns' vectors of a row
// of B and 32 / lanes rows at once: 32 lanes (128-column tiles) where B is wide enough for 16
// such tiles, else 8 (32-column tiles, four rows per load), so that a product with few columns
// (an FFN's second) still has enough tiles. Splits: enough blocks to keep every SM streaming,
// at most one cluster's worth (their sums are added through distributed shared memory).
struct SmallGemmShape {
  index_t tiles = 0;
  int splits = 1, lanes = 32;
};
template <class G>
SmallGemmShape small_gemm_shape(const G& g) {
  SmallGemmShape s;
  s.lanes = g.n / (32 * kSmallGemmVector) >= 16 ? 32 : 8;
  const index_t tile = s.lanes * kSmallGemmVector;
  s.tiles = (g.n + tile - 1) / tile;
  const index_t want = (kSmallGemmBlocks + s.tiles - 1) / s.tiles;
  s.splits = static_cast<int>(std::clamp<index_t>(std::min<index_t>(want, g.k), 1, kSmallGemmMaxSplits));
  return s;
}

// A GEMM's epilogue run after cuBLASLt, the row kernel Epi over the product (load Acc) in
// place, as its own descriptor (launch<GemmEpilogue<Epi, Acc>>, kernels.cuh) so that only
// epilogues instantiate the flat kernel that reads a bias vector at each unit's column
// (RowKernelCuda::run_epilogue).
template <class Epi, int Acc>
struct GemmEpilogue {};
template <class Epi, int Acc>
struct kernel_args<GemmEpilogue<Epi, Acc>> {
  using type = launch_args_t<Epi>;
};

// Launched as its own descriptor: launch<SmallGemm<Desc>> (kernels.cuh).
template <class Desc>
struct SmallGemm {};
template <class Desc>
struct kernel_args<SmallGemm<Desc>> {
  using type = lower::GemmArgs<typename Desc::value_type, Desc::nloads, Desc::nconsts>;
};

// kiln's tensor-core kernels (tc_gemm.cuh): where they apply, 16-bit elements, one matrix, A
// and B row-major with rows of whole 16-byte chunks (k, n and the row strides multiples of 8,
// pointers 16-byte aligned), and an epilogue, if any, over the product's own rows. Variants
// (config.chunks): kTcMma mma.sync with 64 x 64 tiles (sm_80 on); kTcWgmmaTma on Hopper, where
// the kernels were built for sm_90a (KILN_CUDA_SM90A, set by kiln_cuda_executable) and the
// device has compute capability 9.0: wgmma fed by TMA from a producer warpgroup, persistent,
// two consumers taking turns on 128 x 128 tiles. Dropped, slower at every
// shape of an MLP layer 768 -> 3072 measured (docs/design-decisions.md): mma.sync's 128 x 128 tiles (chunks 0) and the
// wgmma kernel fed by cp.async (chunks 2); a cached choice of either runs the 64 x 64 mma.sync.
inline constexpr int kTcMma = 1;
inline constexpr int kTcWgmmaTma = 3;
inline std::vector<int> tc_variants() {
  std::vector<int> v;
  if (!device_has_tensor_mma()) return v;
  v.push_back(kTcMma);
#if defined(KILN_CUDA_SM90A)
  if (device_is_sm90()) v.push_back(kTcWgmmaTma);
#endif
  return v;
}
// Whether a GEMM kernel gets kiln's tensor-core kernels as candidates (and so instantiates
// them): 16-bit elements and an epilogue that cuBLASLt cannot apply itself (an exact gelu, a
// residual add). Where cuBLASLt applies the epilogue, or there is none, it is the faster
// (docs/design-decisions.md), and each kernel instantiated costs build time in every CUDA
// translation unit. Decided by the epilogue's kind alone: a bias epilogue that cuBLASLt leaves
// to the row kernel at plan time (a bias that is not a row vector) gets no candidates either.
template <class Desc>
inline constexpr bool tc_gemm_offered = sizeof(typename Desc::value_type) == 2 && Desc::has_epilogue &&
                                        lt_epilogue_of<Desc> == CUBLASLT_EPILOGUE_DEFAULT;
template <class G>
bool tc_gemm_applies(const G& g, bool has_epilogue) {
  using S = std::remove_cvref_t<decltype(*g.acc)>;
  if constexpr (sizeof(S) != 2) {
    return false;
  } else {
    const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
    if (g.batch != 1 || g.m < 1 || g.n < 1 || g.k < 1) return false;
    if (g.a.col != 1 || g.b.col != 1 || g.a.row % 8 != 0 || g.b.row % 8 != 0 || g.k % 8 != 0 || g.n % 8 != 0) return false;
    if (!aligned(g.a.ptr) || !aligned(g.b.ptr) || !aligned(g.acc)) return false;
    if (has_epilogue && !aligned(g.epilogue.out)) return false;
    return !has_epilogue || (g.in_place && g.epilogue.rows == g.m && g.epilogue.len == g.n);
  }
}
template <class Desc>
struct TcGemm {};
template <class Desc>
struct kernel_args<TcGemm<Desc>> {
  using type = lower::GemmArgs<typename Desc::value_type, Desc::nloads, Desc::nconsts>;
};

// config.variant of a GEMM: 0 the default (the small-product kernel where it applies, else the
// heuristic's first algorithm); kTcGemm kiln's tensor-core kernel (config.chunks its tile
// shape); kLtAlgo + i the heuristic's algorithm i.
inline constexpr int kTcGemm = 8;
inline constexpr int kLtAlgo = 16;
// config.chunks of the small-product kernel's launch: kOverlapPrevious lets it start while the
// previous kernel on the stream runs (run_gemm's overlap_previous).
inline constexpr int kOverlapPrevious = 1;

// Runs GEMM kernel Desc: the product into g.acc, then the epilogue, if any, as a row kernel
// (or by cuBLASLt, when it is one of cuBLASLt's: plan->bias_slot); or both in one kernel for a
// small product (small_gemm_applies, B's rows 16-byte aligned, and a device with clusters:
// before Hopper, cuBLASLt and the epilogue's row kernel).
// overlap_previous: the previous kernel on the stream writes no memory B occupies, so the small
// product may start streaming B while that kernel finishes (Hopper's programmatic dependent
// launch; A and the epilogue's inputs are read after it completes).
// bias_grad_out: where cuBLASLt writes B's column sums when the plan has BGRADA (n values of
// T); the product then always goes through cuBLASLt.
template <class Desc>
void run_gemm(const lower::GemmArgs<typename Desc::value_type, Desc::nloads, Desc::nconsts>& g, GemmPlan* plan,
              const lower::LaunchConfig& cfg, cudaStream_t stream, bool overlap_previous = false, void* bias_grad_out = nullptr) {
  using T = typename Desc::value_type;
  bool epilogue_done = false;  // cuBLASLt applied it
  const bool lt_only = plan && plan->bias_grad;
  if constexpr (tc_gemm_offered<Desc>) {
    if (!lt_only && cfg.variant == kTcGemm && tc_gemm_applies(g, Desc::has_epilogue) && device_has_tensor_mma()) {
      launch<TcGemm<Desc>>(g, cfg, stream, nullptr);
      return;
    }
  }
  if (!lt_only && cfg.variant == 0 && small_gemm_applies(g, Desc::has_epilogue) &&
      reinterpret_cast<std::uintptr_t>(g.b.ptr) % 16 == 0 && device_has_clusters()) {
    lower::LaunchConfig small = cfg;
    small.chunks = overlap_previous ? kOverlapPrevious : 0;
    launch<SmallGemm<Desc>>(g, small, stream, nullptr);
    return;
  }
  if (g.batch > 0 && g.m > 0 && g.n > 0) {
    if (g.k == 0 || !plan) {  // an empty inner dimension: the product is zero
      KILN_CUDA_CHECK(cudaMemsetAsync(g.acc, 0, sizeof(T) * g.batch * g.m * g.n, stream));
    } else {
      const compute_t<T> alpha = 1, beta = 0;
      LtContext& lt = LtContext::get();
      const int i = cfg.variant >= kLtAlgo && cfg.variant - kLtAlgo < plan->nalgos ? cfg.variant - kLtAlgo : 0;
      // cuBLASLt's bias pointer: the bias its epilogue adds (read), or where BGRADA writes the sums.
      const void* bias = plan->bias_slot >= 0 ? g.epilogue.ptr[plan->bias_slot] : plan->bias_grad ? bias_grad_out : nullptr;
      if (plan->bias_grad && !bias_grad_out)
        throw DeviceError("kiln: a GEMM with cuBLASLt's bias-gradient epilogue was given no output for it");
      if (bias) KILN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
      epilogue_done = plan->bias_slot >= 0;
      KILN_CUBLAS_CHECK(cublasLtMatmul(lt.handle, plan->op, &alpha, g.b.ptr, plan->la, g.a.ptr, plan->lb, &beta, g.acc,
                                       plan->lc, g.acc, plan->lc, &plan->algos[i].algo, lt.workspace.get(), kLtWorkspace,
                                       stream));
    }
  }
  if constexpr (Desc::has_epilogue) {
    using Epilogue = lower::RowKernel<T, typename Desc::epilogue, lower::TypeList<>, Desc::nloads, Desc::nconsts>;
    if (!epilogue_done) launch<GemmEpilogue<Epilogue, Desc::acc_slot>>(g.epilogue, lower::LaunchConfig{}, stream, nullptr);
  }
}

// MaxAutotune's GEMM candidates besides Default's configuration (variant 0: the small-product
// kernel where it applies, which MaxAutotune times first as the incumbent): kiln's tensor-core
// kernels where they apply, and the heuristic's first algorithms (none for an empty product).
inline std::vector<lower::LaunchConfig> gemm_candidates(const GemmPlan* plan, bool tensor_cores) {
  std::vector<lower::LaunchConfig> c;
  if (tensor_cores && !(plan && plan->bias_grad))  // kiln's kernels do not write a bias gradient
    for (int variant : tc_variants()) c.push_back({0, variant, kTcGemm, 0});
  for (int i = 0; i < (plan ? std::min(plan->nalgos, 4) : 1); ++i) c.push_back({0, 0, kLtAlgo + i, 0});
  return c;
}

}  // namespace kiln::cuda
