// kiln: GEMM + epilogue on the CPU. Fuses a matmul with the pointwise ops on its result
// (bias, activation, residual, scale): the product fills a cache-sized panel of the result,
// then the epilogue runs over that panel while it is still in cache, in place. The matmul
// result is never written to memory on its own and read back.
//
// Paths: Eigen's GEMM kernel (its packing buffers kept per thread in a GemmWorkspace, so a
// repeated call allocates nothing; operands row- or column-major, so transposed views are read
// in place), a SIMD loop for products with a few rows (GEMV-like, bound by reading B once),
// and Eigen's public product for operands with no unit stride, which may allocate. 16-bit
// operands are widened into float scratch kept in the same workspace, so that path allocates
// nothing per call either.
//
// When the epilogue's output has another shape than the matmul (the result is broadcast), the
// product goes to a scratch buffer first and the epilogue runs as a row kernel after it.
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include <Eigen/Core>

#include "kiln/backend/cpu/row_kernel.hpp"

namespace kiln::cpu {

using lower::GemmArgs;
using lower::MatrixView;

// Eigen's packing buffers, one per thread, sized for the largest tile and reused; and, for
// 16-bit operands, the float copies of A (m x k), B (k x n) and the product (m x n).
// Invariant: the buffers only grow, and a growth that fails (std::bad_alloc) leaves them as they
// were, so a workspace reserved for Default's configuration still serves it after a MaxAutotune
// candidate failed to reserve more.
template <class T>
struct GemmWorkspace {
  using Blocking = Eigen::internal::gemm_blocking_space<Eigen::ColMajor, T, T, Eigen::Dynamic, Eigen::Dynamic, Eigen::Dynamic>;
  std::vector<std::unique_ptr<Blocking>> per_thread;
  index_t m = 0, n = 0, k = 0;
  std::vector<T> wide_a, wide_b, wide_c;

  void reserve(index_t m_, index_t n_, index_t k_, int threads) {
    if (m_ <= m && n_ <= n && k_ <= k && static_cast<int>(per_thread.size()) >= threads) return;
    const index_t gm = std::max(m, m_), gn = std::max(n, n_), gk = std::max(k, k_);
    const std::size_t count = std::max(static_cast<std::size_t>(std::max(threads, 0)), per_thread.size());
    std::vector<std::unique_ptr<Blocking>> fresh;
    fresh.reserve(count);
    for (std::size_t t = 0; t < count; ++t) {
      fresh.push_back(std::make_unique<Blocking>(std::max<index_t>(gm, 1), std::max<index_t>(gn, 1), std::max<index_t>(gk, 1), 1, true));
      fresh.back()->allocateAll();
    }
    per_thread.swap(fresh);
    m = gm, n = gn, k = gk;
  }

  // The widened operands and product of an m x k by k x n product.
  void reserve_widened(index_t m_, index_t n_, index_t k_) {
    const auto grow = [](std::vector<T>& v, index_t size) {
      if (static_cast<index_t>(v.size()) < size) v.resize(static_cast<std::size_t>(size));
    };
    grow(wide_a, m_ * k_);
    grow(wide_b, k_ * n_);
    grow(wide_c, m_ * n_);
    reserve(m_, n_, k_, 1);
  }
  // For a product of few rows: A widened, nothing else.
  void reserve_few_rows(index_t m_, index_t k_) {
    if (static_cast<index_t>(wide_a.size()) < m_ * k_) wide_a.resize(static_cast<std::size_t>(m_ * k_));
  }
};

// Whether Eigen's packed kernel reads a matrix view directly: one of its strides is 1
// (row-major, or column-major as a transposed view of a row-major value is).
template <class T>
bool packable(const MatrixView<T>& v) {
  return v.col == 1 || v.row == 1;
}

// C[m x n] (row stride ldc) = A B for A and B each row-major or column-major: Eigen's
// column-major kernel computes C^T = B^T A^T, which is the same memory; a column-major operand
// is a row-major one of its transpose, so a transposed view costs no copy.
template <int LhsOrder, int RhsOrder, class T>
void gemm_eigen(const T* a, index_t lda, const T* b, index_t ldb, T* c, index_t ldc, index_t m, index_t n, index_t k,
                typename GemmWorkspace<T>::Blocking& blocking) {
  Eigen::internal::general_matrix_matrix_product<index_t, T, LhsOrder, false, T, RhsOrder, false, Eigen::ColMajor, 1>::run(
      n, m, k, b, ldb, a, lda, c, 1, ldc, T(1), blocking, nullptr);
}
template <class T>
void gemm_packed(const T* a, index_t a_row, index_t a_col, const T* b, index_t b_row, index_t b_col, T* c, index_t ldc,
                 index_t m, index_t n, index_t k, typename GemmWorkspace<T>::Blocking& blocking) {
  for (index_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, T(0));  // the kernel accumulates
  if (k == 0) return;
  // B^T is Eigen's left operand, A^T its right one.
  constexpr int Col = Eigen::ColMajor, Row = Eigen::RowMajor;
  if (b_col == 1 && a_col == 1) gemm_eigen<Col, Col>(a, a_row, b, b_row, c, ldc, m, n, k, blocking);
  else if (b_col == 1) gemm_eigen<Col, Row>(a, a_col, b, b_row, c, ldc, m, n, k, blocking);
  else if (a_col == 1) gemm_eigen<Row, Col>(a, a_row, b, b_col, c, ldc, m, n, k, blocking);
  else gemm_eigen<Row, Row>(a, a_col, b, b_col, c, ldc, m, n, k, blocking);
}

// C[m x n] = A B for a few rows: C_i = sum_k A_ik B_k as SIMD axpys over B's rows, four rows
// of B at a time for every row of C (one load and store of C_i per four rows of B). B is read
// once, so the product runs at memory speed; C's rows stay in cache.
template <class T>
void gemm_rows(const T* a, index_t lda, const T* b, index_t ldb, T* c, index_t ldc, index_t m, index_t n, index_t k) {
  for (index_t i = 0; i < m; ++i) std::fill_n(c + i * ldc, n, T(0));
  index_t kk = 0;
  for (; kk + 4 <= k; kk += 4) {
    const T* __restrict b0 = b + kk * ldb;
    const T* __restrict b1 = b0 + ldb;
    const T* __restrict b2 = b1 + ldb;
    const T* __restrict b3 = b2 + ldb;
    for (index_t i = 0; i < m; ++i) {
      T* __restrict ci = c + i * ldc;
      const T a0 = a[i * lda + kk], a1 = a[i * lda + kk + 1], a2 = a[i * lda + kk + 2], a3 = a[i * lda + kk + 3];
      KILN_SIMD
      for (index_t j = 0; j < n; ++j) ci[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
    }
  }
  for (; kk < k; ++kk) {
    const T* __restrict bk = b + kk * ldb;
    for (index_t i = 0; i < m; ++i) {
      T* __restrict ci = c + i * ldc;
      const T aik = a[i * lda + kk];
      KILN_SIMD
      for (index_t j = 0; j < n; ++j) ci[j] += aik * bk[j];
    }
  }
}

// Any strides: Eigen's public product (it copies what it cannot read directly).
template <class T>
void gemm_strided(const T* a, index_t a_row, index_t a_col, const T* b, index_t b_row, index_t b_col, T* c, index_t ldc,
                  index_t m, index_t n, index_t k) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using S = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
  Eigen::Map<Mat, Eigen::Unaligned, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
  Eigen::Map<const Mat, Eigen::Unaligned, S> A(a, m, k, S(a_row, a_col));
  Eigen::Map<const Mat, Eigen::Unaligned, S> B(b, k, n, S(b_row, b_col));
  C.noalias() = A * B;
}

template <class Desc>
struct GemmKernelCpu;

template <class T, class Epi, int AccSlot, int NL, int NC>
struct GemmKernelCpu<lower::GemmKernel<T, Epi, AccSlot, NL, NC>> {
  using Desc = lower::GemmKernel<T, Epi, AccSlot, NL, NC>;
  using Args = GemmArgs<T, NL, NC>;
  using Epilogue = RowKernelCpu<lower::RowKernel<T, Epi, lower::TypeList<>, NL, NC>>;
  static constexpr index_t kRowsLoop = 4;  // up to this many rows the GEMV-like loop is used
  static constexpr index_t kFewRows = 4;   // 16-bit operands: up to this many rows, run_widened_few_rows
  static constexpr index_t kDefaultPanelBytes = index_t{1} << 20;

  struct Tiling {
    index_t rows_per_tile, cols_per_tile, row_tiles, col_tiles;
    int threads;
  };
  // Tiles: whole matrices when there are enough batches, else row panels, else column panels
  // (a product with few rows splits the columns of B across threads).
  static Tiling tiling(const Args& g) {
    // Threads from about 2M multiply-adds (a few tens of microseconds of work): below that, a
    // parallel region costs more than it saves.
    Tiling t{g.m, g.n, 1, 1, threads_for(g.batch * g.m * g.n * std::max<index_t>(g.k, 1) / 64, g.config)};
    int variant = g.config.variant;
    if (variant == 0 || variant == 3) {
      if (g.batch >= t.threads) variant = 0;
      else if (g.m >= 16 * t.threads) variant = 1;
      else variant = 2;
    }
    if (variant == 1) t.rows_per_tile = std::max<index_t>(1, (g.m + t.threads - 1) / t.threads);
    if (variant == 2) t.cols_per_tile = std::max<index_t>(16, ((g.n + t.threads - 1) / t.threads + 15) / 16 * 16);
    t.row_tiles = std::max<index_t>(1, (g.m + t.rows_per_tile - 1) / std::max<index_t>(t.rows_per_tile, 1));
    t.col_tiles = std::max<index_t>(1, (g.n + t.cols_per_tile - 1) / std::max<index_t>(t.cols_per_tile, 1));
    return t;
  }
  static bool use_rows_loop(const Args& g) {
    return g.a.col == 1 && g.b.col == 1 && (g.config.variant == 3 || (g.config.variant == 0 && g.m <= kRowsLoop));
  }

  using Workspace = GemmWorkspace<compute_t<T>>;

  // Called once per plan and launch configuration, before any kernel of a call: Eigen's packing
  // buffers for the largest tile, per thread; for 16-bit operands the float scratch and one
  // packing buffer for the whole product.
  static void prepare(const Args& g, Workspace& ws) {
    if constexpr (!std::is_same_v<T, compute_t<T>>) {
      if (g.m <= kFewRows) ws.reserve_few_rows(g.m, g.k);
      else ws.reserve_widened(g.m, g.n, g.k);
      return;
    }
    if (!packable(g.a) || !packable(g.b) || use_rows_loop(g)) return;
    const Tiling t = tiling(g);
    ws.reserve(t.rows_per_tile, t.cols_per_tile, g.k, max_threads());
  }

  // MaxAutotune's candidates: one thread; row or column panels with three epilogue panel sizes;
  // the rows loop when there are few rows.
  static std::vector<LaunchConfig> candidates(const Args& g) {
    std::vector<LaunchConfig> c = {{1, 0, 0, 0}};
    for (int variant : {1, 2})
      for (index_t panel : {index_t{256} << 10, index_t{1} << 20, index_t{4} << 20}) c.push_back({0, 0, variant, panel});
    if (g.a.col == 1 && g.b.col == 1 && g.m <= 64) c.push_back({0, 0, 3, kDefaultPanelBytes});
    return c;
  }

  using C = compute_t<T>;

  static void run(const Args& g, Workspace& ws) {
    if constexpr (std::is_same_v<T, C>) run_native(g, ws);
    else run_widened(g, ws);
  }

  // 16-bit operands: widened to float (row-major A: m x k, B: k x n, in the workspace),
  // multiplied by Eigen's packed kernel in float, the product rounded once into acc; then the
  // epilogue over the whole output. (PyTorch's CPU bf16 matmul rounds its result the same
  // way.) Allocates nothing: prepare reserved the scratch and the packing buffer.
  static void run_widened(const Args& g, Workspace& ws) {
    if (g.m <= kFewRows) return run_widened_few_rows(g, ws);
    C* a = ws.wide_a.data();
    C* b = ws.wide_b.data();
    C* c = ws.wide_c.data();
    for (index_t bt = 0; bt < g.batch; ++bt) {
      for (index_t i = 0; i < g.m; ++i)
        for (index_t kk = 0; kk < g.k; ++kk) a[i * g.k + kk] = widen(g.a.ptr[bt * g.a.batch + i * g.a.row + kk * g.a.col]);
      for (index_t kk = 0; kk < g.k; ++kk)
        for (index_t j = 0; j < g.n; ++j) b[kk * g.n + j] = widen(g.b.ptr[bt * g.b.batch + kk * g.b.row + j * g.b.col]);
      if (g.m > 0 && g.n > 0) gemm_packed(a, g.k, index_t{1}, b, g.n, index_t{1}, c, g.n, g.m, g.n, g.k, *ws.per_thread[0]);
      T* out = g.acc + bt * g.m * g.n;
      for (index_t i = 0; i < g.m * g.n; ++i) out[i] = narrow<T>(c[i]);
    }
    if constexpr (Desc::has_epilogue) Epilogue::run(g.epilogue);
  }

  // 16-bit operands and at most kFewRows rows of A (a decode step's projections: B is a
  // weight, [k, n] or its transposed view): A widened into the workspace, B read once in its
  // own type, columns of C split across threads. Each c[i, j] is a float sum over k in the
  // order k = 0, 1, ..., rounded once into acc, as the widened product above does. Widening
  // the whole of B per call there costs more than the product at these shapes (a GPT-2 lm_head
  // is 38.6 M weights for 50257 outputs of one row).
  static void run_widened_few_rows(const Args& g, Workspace& ws) {
    C* a = ws.wide_a.data();
    const int threads = threads_for(g.batch * g.m * g.n * std::max<index_t>(g.k, 1) / 64, g.config);
    constexpr index_t kCols = 64;  // columns per task
    for (index_t bt = 0; bt < g.batch; ++bt) {
      for (index_t i = 0; i < g.m; ++i)
        for (index_t kk = 0; kk < g.k; ++kk) a[i * g.k + kk] = widen(g.a.ptr[bt * g.a.batch + i * g.a.row + kk * g.a.col]);
      const T* b = g.b.ptr + bt * g.b.batch;
      T* out = g.acc + bt * g.m * g.n;
      parallel_for((g.n + kCols - 1) / kCols, threads, [&](index_t task) {
        const index_t j0 = task * kCols, j1 = std::min(g.n, j0 + kCols);
        C acc[kFewRows][kCols] = {};
        if (g.b.row == 1) {  // B's columns contiguous (a transposed [n, k] weight): dot products
          for (index_t j = j0; j < j1; ++j) {
            const T* col = b + j * g.b.col;
            for (index_t i = 0; i < g.m; ++i) {
              C sum = 0;
              for (index_t kk = 0; kk < g.k; ++kk) sum += a[i * g.k + kk] * widen(col[kk]);
              acc[i][j - j0] = sum;
            }
          }
        } else {  // B's rows contiguous or strided: rank-1 updates row by row of B
          for (index_t kk = 0; kk < g.k; ++kk) {
            const T* row = b + kk * g.b.row;
            for (index_t i = 0; i < g.m; ++i) {
              const C x = a[i * g.k + kk];
              for (index_t j = j0; j < j1; ++j) acc[i][j - j0] += x * widen(row[j * g.b.col]);
            }
          }
        }
        for (index_t i = 0; i < g.m; ++i)
          for (index_t j = j0; j < j1; ++j) out[i * g.n + j] = narrow<T>(acc[i][j - j0]);
      });
    }
    if constexpr (Desc::has_epilogue) Epilogue::run(g.epilogue);
  }

  static void run_native(const Args& g, Workspace& ws) {
    const Tiling t = tiling(g);
    const bool rows_loop = use_rows_loop(g);
    const bool packed = !rows_loop && packable(g.a) && packable(g.b) && static_cast<int>(ws.per_thread.size()) >= t.threads &&
                        ws.m >= t.rows_per_tile && ws.n >= t.cols_per_tile && ws.k >= g.k;
    const index_t panel_bytes = g.config.panel_bytes > 0 ? g.config.panel_bytes : kDefaultPanelBytes;
    const index_t tasks = g.batch * t.row_tiles * t.col_tiles;
    // The workspace slot: this kernel's thread number inside the region parallel_for opens; on
    // the serial path (maybe inside the caller's own parallel region) always slot 0.
    const bool spawned = tasks > 1 && t.threads > 1;
    parallel_for(tasks, t.threads, [&](index_t task) {
      const index_t b = task / (t.row_tiles * t.col_tiles), rt = (task / t.col_tiles) % t.row_tiles, ct = task % t.col_tiles;
      const index_t i0 = rt * t.rows_per_tile, i1 = std::min(g.m, i0 + t.rows_per_tile);
      const index_t j0 = ct * t.cols_per_tile, j1 = std::min(g.n, j0 + t.cols_per_tile);
      if (i0 >= i1 || j0 >= j1) return;
      // Within a tile, column panels of about panel_bytes: the epilogue reads each panel right
      // after the product wrote it, from cache; B's columns are packed once either way.
      const index_t rows = i1 - i0;
      const index_t panel = std::max<index_t>(64, panel_bytes / static_cast<index_t>(sizeof(T)) / rows / 16 * 16);
      const T* a = g.a.ptr + b * g.a.batch + i0 * g.a.row;
      for (index_t p0 = j0; p0 < j1; p0 += panel) {
        const index_t p1 = std::min(j1, p0 + panel);
        const T* bp = g.b.ptr + b * g.b.batch + p0 * g.b.col;
        T* c = g.acc + b * g.m * g.n + i0 * g.n + p0;
        if (rows_loop) gemm_rows(a, g.a.row, bp, g.b.row, c, g.n, rows, p1 - p0, g.k);
        else if (packed)
          gemm_packed(a, g.a.row, g.a.col, bp, g.b.row, g.b.col, c, g.n, rows, p1 - p0, g.k,
                      *ws.per_thread[spawned ? thread_index() : 0]);
        else gemm_strided(a, g.a.row, g.a.col, bp, g.b.row, g.b.col, c, g.n, rows, p1 - p0, g.k);
        if constexpr (Desc::has_epilogue) {
          if (g.in_place) Epilogue::run_tile(g.epilogue, b * g.m + i0, b * g.m + i1, p0, p1);
        }
      }
    });
    if constexpr (Desc::has_epilogue) {
      if (!g.in_place) Epilogue::run(g.epilogue);
    }
  }
};

}  // namespace kiln::cpu
