// kiln: the row kernel on the CPU, which runs both the pointwise kind (no stages) and the
// row-reduction kind. Fuses: per row, every last-axis reduction stage (with its pointwise
// prologue recomputed from the inputs, never stored) and the pointwise epilogue that reads the
// stage results; writes only the root. Rows are spread over threads; the inner loop over a
// row is a SIMD loop.
//
// Arguments and addressing: lower/args.hpp (RowArgs).
#pragma once
#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/expr/ops/reduce.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cpu {

using lower::kRowCache;
using lower::row_args_t;
using lower::row_pointers;
using lower::RowArgs;

inline constexpr index_t kShortRow = 32;  // rows shorter than this reduce in a plain loop

// The evaluation context of one row. Unit: every inner stride is 1. Cached: cached stages keep
// their input's values for the row (cache[S] points at a buffer of the row's length).
// Loads read storage type T and widen to C = compute_t<T>, in which everything else is kept.
template <class T, int NL, int NC, int NS, bool Unit, bool Cached = false>
struct RowContext {
  using C = compute_t<T>;
  static constexpr bool row_cache = Cached;
  const T* row_ptr[NL > 0 ? NL : 1];
  const index_t* inner;
  const C* consts;
  C stages[NS > 0 ? NS : 1];
  C* cache[NS > 0 ? NS : 1];

  KILN_INLINE C cached(int s, index_t j) const { return cache[s][j]; }

  template <int S>
  KILN_INLINE C load(index_t j) const {
    if constexpr (Unit) return widen(row_ptr[S][j]);
    else return widen(row_ptr[S][j * inner[S]]);
  }
  template <int S>
  KILN_INLINE C scalar() const {
    return widen(row_ptr[S][0]);
  }
  KILN_INLINE C constant(int c) const { return consts[c]; }
  KILN_INLINE C stage(int k) const { return stages[k]; }
};

template <class T, int NL, int NC, int NS, bool Unit, bool Cached>
KILN_INLINE void set_row(RowContext<T, NL, NC, NS, Unit, Cached>& ctx, const RowArgs<T, NL, NC, NS>& a, index_t row) {
  row_pointers(a, row, ctx.row_ptr);
}

template <class T, class Tree, class Ctx>
KILN_INLINE void eval_span(const Ctx& ctx, T* __restrict out, index_t j0, index_t j1) {
  KILN_SIMD
  for (index_t j = j0; j < j1; ++j) out[j] = narrow<T>(Tree::template eval<compute_t<T>>(ctx, j));
}

// Reduces value(j) for j in [0, n) with K in a SIMD loop. OpenMP's max and min reductions
// drop NaN, so NaN is tracked apart and wins, as in PyTorch (and kiln::maximum).
template <ReduceKind K, class T, class Value>
KILN_INLINE T reduce_values(index_t n, Value&& value) {
  T acc = Reduce<K, 0, false, false>::template identity<T>();
  if (n < kShortRow) {
    // A short row: a plain loop. The SIMD loop below keeps one partial result per lane and
    // combines them afterwards, which costs more than the row itself here.
    bool nan = false;
    for (index_t j = 0; j < n; ++j) {
      const T v = value(j);
      nan = nan || v != v;
      if constexpr (K == ReduceKind::Max) acc = std::max(acc, v);
      else if constexpr (K == ReduceKind::Min) acc = std::min(acc, v);
      else acc += v;
    }
    if constexpr (K == ReduceKind::Max || K == ReduceKind::Min) return nan ? std::numeric_limits<T>::quiet_NaN() : acc;
    else return acc;
  }
  if constexpr (K == ReduceKind::Max || K == ReduceKind::Min) {
    int nan = 0;
    if constexpr (K == ReduceKind::Max) {
      KILN_SIMD_REDUCE2(max, acc, |, nan)
      for (index_t j = 0; j < n; ++j) {
        const T v = value(j);
        nan |= v != v;
        acc = std::max(acc, v);
      }
    } else {
      KILN_SIMD_REDUCE2(min, acc, |, nan)
      for (index_t j = 0; j < n; ++j) {
        const T v = value(j);
        nan |= v != v;
        acc = std::min(acc, v);
      }
    }
    return nan ? std::numeric_limits<T>::quiet_NaN() : acc;
  } else {
    KILN_SIMD_REDUCE(+, acc)
    for (index_t j = 0; j < n; ++j) acc += value(j);
    return acc;
  }
}

// Combines two partial results of K; NaN wins.
template <ReduceKind K, class T>
KILN_INLINE T reduce_combine(T a, T b) {
  if constexpr (K == ReduceKind::Max) return (b != b || b > a) ? b : a;
  else if constexpr (K == ReduceKind::Min) return (b != b || b < a) ? b : a;
  else return a + b;
}

// Reduces Tree over a row and finishes it (mean divides); with Keep, also stores each value in
// keep[j].
template <ReduceKind K, class T, class Tree, bool Keep = false, class Ctx>
KILN_INLINE T reduce_span(const Ctx& ctx, index_t len, T* __restrict keep = nullptr) {
  const T acc = reduce_values<K, T>(len, [&](index_t j) {
    const T v = Tree::template eval<T>(ctx, j);
    if constexpr (Keep) keep[j] = v;
    return v;
  });
  return Reduce<K, 0, false, false>::template finish<T>(acc, len);
}

template <class Desc>
struct RowKernelCpu;

// Out and each extra tree at [j0, j1) of row r: every value of an element is computed before
// any is stored, so an output written over an input it reads (an in-place kiln::assign) reads
// the old value.
template <class T, class Out, class... Extras, class Ctx, class Args>
KILN_INLINE void eval_span_extras(const Ctx& ctx, const Args& a, index_t r, index_t j0, index_t j1) {
  using C = compute_t<T>;
  T* const out = a.out + r * a.len;
  T* extra[sizeof...(Extras)];
  bool all = true;
  for (std::size_t e = 0; e < sizeof...(Extras); ++e) {
    extra[e] = a.extra_out[e] ? a.extra_out[e] + r * a.len : nullptr;
    all = all && extra[e];
  }
  if (all) {
    KILN_SIMD
    for (index_t j = j0; j < j1; ++j) {
      const C o = Out::template eval<C>(ctx, j);
      const C x[] = {Extras::template eval<C>(ctx, j)...};
      out[j] = narrow<T>(o);
      for (std::size_t e = 0; e < sizeof...(Extras); ++e) extra[e][j] = narrow<T>(x[e]);
    }
    return;
  }
  for (index_t j = j0; j < j1; ++j) {
    const C o = Out::template eval<C>(ctx, j);
    const C x[] = {Extras::template eval<C>(ctx, j)...};
    out[j] = narrow<T>(o);
    for (std::size_t e = 0; e < sizeof...(Extras); ++e)
      if (extra[e]) extra[e][j] = narrow<T>(x[e]);
  }
}

template <class T, class Out, class... Stages, int NL, int NC, class A, class... Extras>
struct RowKernelCpu<lower::RowKernel<T, Out, lower::TypeList<Stages...>, NL, NC, A, lower::TypeList<Extras...>>> {
  static constexpr int NS = sizeof...(Stages), NE = sizeof...(Extras);
  using Args = row_args_t<T, NL, NC, NS, NE>;
  using C = compute_t<T>;

  static constexpr int kCachedStages = (0 + ... + Stages::cached);

  template <bool Unit, bool Cached = false>
  static KILN_INLINE void row(const Args& a, index_t r, index_t j0, index_t j1) {
    RowContext<T, NL, NC, NS, Unit, Cached> ctx;
    ctx.inner = a.inner;
    ctx.consts = a.consts;
    alignas(64) C keep[Cached ? kCachedStages : 1][Cached ? kRowCache : 1];
    if constexpr (Cached) {
      int k = 0, s = 0;
      ((ctx.cache[s++] = Stages::cached ? keep[k++] : nullptr), ...);
    }
    set_row(ctx, a, r);
    run_stages(ctx, a, std::index_sequence_for<Stages...>{});
    if constexpr (NE > 0) eval_span_extras<T, Out, Extras...>(ctx, a, r, j0, j1);
    else eval_span<T, Out>(ctx, a.out + r * a.len, j0, j1);
  }

  template <class Ctx, std::size_t... S>
  static KILN_INLINE void run_stages(Ctx& ctx, const Args& a, std::index_sequence<S...>) {
    ((ctx.stages[S] = reduce_span<Stages::kind, C, typename Stages::tree, Ctx::row_cache && Stages::cached>(
          ctx, a.stage_len[S], ctx.cache[S])),
     ...);
  }

  template <bool Unit>
  static KILN_INLINE void row_any(const Args& a, index_t r, index_t j0, index_t j1) {
    if constexpr (kCachedStages > 0) {
      if (a.row_cache) return row<Unit, true>(a, r, j0, j1);
    }
    row<Unit, false>(a, r, j0, j1);
  }

  // Rows [r0, r1), columns [j0, j1) of the output: used by the GEMM epilogue on a tile.
  static void run_tile(const Args& a, index_t r0, index_t r1, index_t j0, index_t j1) {
    for (index_t r = r0; r < r1; ++r) {
      if (a.unit_inner) row_any<true>(a, r, j0, j1);
      else row_any<false>(a, r, j0, j1);
    }
  }

  // MaxAutotune's candidates: one thread or all; for pointwise kernels, how finely rows split.
  static std::vector<LaunchConfig> candidates(const Args&) {
    const int t = max_threads();
    std::vector<LaunchConfig> c = {{1, 0, 0, 0}, {t, 0, 0, 0}};
    if constexpr (NS == 0)
      for (int chunks : {1, 4 * t, 16 * t}) c.push_back({t, chunks, 0, 0});
    return c;
  }

  static void run(const Args& a) {
    const int threads = threads_for(a.rows * a.len * (NS + 1), a.config);
    // Without stages a row may be split into chunks, so one long row still uses every thread.
    index_t chunks = 1;
    if (NS == 0 && a.config.chunks > 0) {
      chunks = std::min<index_t>(a.config.chunks, std::max<index_t>(1, a.len / 64));
    } else if (NS == 0 && a.rows < 4 * threads) {
      const index_t want = std::max<index_t>(1, (4 * threads) / std::max<index_t>(a.rows, 1));
      chunks = std::min<index_t>(want, std::max<index_t>(1, a.len / 4096));
    }
    const index_t chunk_len = (a.len + chunks - 1) / chunks;
    parallel_for(a.rows * chunks, threads, [&](index_t task) {
      const index_t r = task / chunks, c = task % chunks;
      const index_t j0 = c * chunk_len, j1 = std::min(a.len, j0 + chunk_len);
      if (a.unit_inner) row_any<true>(a, r, j0, j1);
      else row_any<false>(a, r, j0, j1);
    });
  }
};

}  // namespace kiln::cpu
