// kiln: GEMM + epilogue on the CPU. Fuses a matmul with the pointwise ops on its result
// (bias, activation, residual, scale): Eigen's product fills a cache-sized panel of the result, then the
// epilogue runs over that panel while it is still in cache, in place. The matmul result is
// never written to memory on its own and read back.
//
// When the epilogue's output has another shape than the matmul (the result is broadcast), the
// product goes to a scratch buffer first and the epilogue runs as a row kernel after it.
#pragma once
#include <algorithm>

#include <Eigen/Core>

#include "kiln/backend/cpu/row_kernel.hpp"

namespace kiln::cpu {

// One operand, as a batch of matrices: element (b, i, j) at ptr[b*batch + i*row + j*col].
template <class T>
struct MatrixView {
  const T* ptr = nullptr;
  index_t batch = 0, row = 0, col = 1;
};

template <class T, int NL, int NC>
struct GemmArgs {
  RowArgs<T, NL, NC, 0> epilogue;  // over the output; its acc slot points at `acc`
  MatrixView<T> a, b;
  T* acc = nullptr;                // batch x M x N, contiguous
  index_t batch = 1, m = 0, n = 0, k = 0;
  bool in_place = true;  // acc is the output and the epilogue's rows are acc's rows
  index_t panel_bytes = index_t{1} << 20;  // the epilogue runs per column panel of about this size
};

// C[m x n] (row stride ldc) = A B, single-threaded inside a parallel region.
template <class T>
void gemm_tile(const T* a, index_t a_row, index_t a_col, const T* b, index_t b_row, index_t b_col, T* c,
               index_t ldc, index_t m, index_t n, index_t k) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<Mat, Eigen::Unaligned, Eigen::OuterStride<>> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (a_col == 1 && b_col == 1) {
    Eigen::Map<const Mat, Eigen::Unaligned, Eigen::OuterStride<>> A(a, m, k, Eigen::OuterStride<>(a_row));
    Eigen::Map<const Mat, Eigen::Unaligned, Eigen::OuterStride<>> B(b, k, n, Eigen::OuterStride<>(b_row));
    C.noalias() = A * B;
  } else {  // a transposed view: Eigen copies what it cannot read directly
    using S = Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>;
    Eigen::Map<const Mat, Eigen::Unaligned, S> A(a, m, k, S(a_row, a_col));
    Eigen::Map<const Mat, Eigen::Unaligned, S> B(b, k, n, S(b_row, b_col));
    C.noalias() = A * B;
  }
}

template <class Desc>
struct GemmKernelCpu;

template <class T, class Epi, int AccSlot, int NL, int NC>
struct GemmKernelCpu<lower::GemmKernel<T, Epi, AccSlot, NL, NC>> {
  using Desc = lower::GemmKernel<T, Epi, AccSlot, NL, NC>;
  using Args = GemmArgs<T, NL, NC>;
  using Epilogue = RowKernelCpu<lower::RowKernel<T, Epi, lower::TypeList<>, NL, NC>>;

  static void run(const Args& g) {
    const int threads = max_threads();
    // Tiles: whole matrices when there are enough batches, else row panels, else column
    // panels (a GEMV-like product with few rows splits the columns of B across threads).
    index_t rows_per_tile = g.m, cols_per_tile = g.n;
    if (g.batch < threads) {
      if (g.m >= 16 * threads) rows_per_tile = (g.m + threads - 1) / threads;
      else if (g.n >= 64 * threads) cols_per_tile = ((g.n + threads - 1) / threads + 15) / 16 * 16;
    }
    const index_t row_tiles = std::max<index_t>(1, (g.m + rows_per_tile - 1) / std::max<index_t>(rows_per_tile, 1));
    const index_t col_tiles = std::max<index_t>(1, (g.n + cols_per_tile - 1) / std::max<index_t>(cols_per_tile, 1));
    const index_t tiles = g.batch * row_tiles * col_tiles;
    const index_t work = g.batch * g.m * g.n * std::max<index_t>(g.k, 1);
    parallel_for(tiles, work, [&](index_t t) {
      const index_t b = t / (row_tiles * col_tiles), rt = (t / col_tiles) % row_tiles, ct = t % col_tiles;
      const index_t i0 = rt * rows_per_tile, i1 = std::min(g.m, i0 + rows_per_tile);
      const index_t j0 = ct * cols_per_tile, j1 = std::min(g.n, j0 + cols_per_tile);
      if (i0 >= i1 || j0 >= j1) return;
      // Within a tile, column panels of about kPanelBytes: the epilogue reads each panel right
      // after the product wrote it, from cache; B's columns are packed once either way.
      const index_t rows = i1 - i0;
      const index_t panel = std::max<index_t>(64, g.panel_bytes / static_cast<index_t>(sizeof(T)) / rows / 16 * 16);
      for (index_t p0 = j0; p0 < j1; p0 += panel) {
        const index_t p1 = std::min(j1, p0 + panel);
        gemm_tile(g.a.ptr + b * g.a.batch + i0 * g.a.row, g.a.row, g.a.col, g.b.ptr + b * g.b.batch + p0 * g.b.col,
                  g.b.row, g.b.col, g.acc + b * g.m * g.n + i0 * g.n + p0, g.n, rows, p1 - p0, g.k);
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
