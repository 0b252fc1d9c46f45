// kiln: the attention kind on the CPU (expr/ops/attention.hpp; lower/args.hpp's AttentionArgs).
// Blocked, with the online softmax: a task owns a tile of kTile queries of one head (or, for
// dk and dv, a tile of kTile keys of one key/value head) and walks the other side in tiles of
// kTile, so the scores live in one kTile x kTile block and [q_len, kv_len] is never stored.
//   Out, Stats: per query tile, for each key tile: s = (scale q) k^T, then per row the running
//     max m, the running sum l = sum exp(s - m) and the running numerators (sum p v for Out,
//     sum p (g . v) for Stats), each rescaled by exp(m_old - m_new) when the max grows.
//   GradQ: per query tile, p = exp(s - lse) recomputed, ds = p (g v^T - delta), dq += ds k.
//   GradK, GradV: per key tile, over every query head of its group and every query tile that
//     sees it: dk += ds^T q (scaled), dv += p^T g.
// Products are blocked as rows x (columns transposed into a kTile-wide panel), so the inner loop
// runs over kTile contiguous columns (SIMD) for q k^T, and over the head dimension for p v.
// Maths in compute_t<T> (float for bf16 and f16, whose loads widen); each task reads its
// operands through their strides into its thread's workspace, reserved by prepare().
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/math.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cpu {

template <class Desc>
struct AttentionKernelCpu;

template <class T, int Part, bool Causal, int NL, class I>
struct AttentionKernelCpu<lower::AttentionKernel<T, Part, Causal, NL, I>> {
  using Desc = lower::AttentionKernel<T, Part, Causal, NL, I>;
  using Args = lower::AttentionArgs<T, NL, I>;
  using C = compute_t<T>;
  static constexpr index_t kTile = 64;
  static constexpr C kNegInf = -std::numeric_limits<C>::infinity();

  // An IndexError for a kv_len outside [0, the cache's positions], or a window [first, end)
  // that is not one of them (0 <= first <= end <= positions).
  static void check_ids(const Args& a)
    requires(!std::is_void_v<I>)
  {
    for (index_t b = 0; b < a.batch; ++b) {
      const auto n = static_cast<long long>(a.ids[b * a.ids_stride + a.end_offset]);
      const auto first = a.windows ? static_cast<long long>(a.ids[b * a.ids_stride]) : 0;
      if (a.windows && (first < 0 || first > n || n > a.kv_len))
        throw IndexError("attention: the key window [" + std::to_string(first) + ", " + std::to_string(n) + ") of batch " +
                         std::to_string(b) + " is not a window of the cache, which has " + std::to_string(a.kv_len) +
                         " positions");
      if (n < 0 || n > a.kv_len)
        throw IndexError("attention: kv_len " + std::to_string(n) + " of batch " + std::to_string(b) +
                         " is not a length of the cache, which has " + std::to_string(a.kv_len) + " positions");
    }
  }

  // A thread's buffers: two row blocks and two transposed panels of kTile x dim, a row block
  // for the product's right side, the scores and their second product (kTile x kTile), the
  // accumulator, and five per-row values.
  struct Buffers {
    C *rows_a, *rows_b, *panel_a, *panel_b, *rows_c, *rows_d, *s, *s2, *acc, *m, *l, *u, *lse, *delta;
  };
  static index_t dim_of(const Args& a) { return std::max(a.head_dim, a.v_dim); }
  static index_t per_thread(const Args& a) { return 7 * kTile * dim_of(a) + 2 * kTile * kTile + 5 * kTile; }
  struct Workspace {
    std::vector<C> data;
  };
  static void prepare(const Args& a, Workspace& ws) {
    const auto n = static_cast<std::size_t>(per_thread(a) * max_threads());
    if (ws.data.size() < n) ws.data.resize(n);
  }
  static Buffers buffers(const Args& a, Workspace& ws) {
    C* p = ws.data.data() + per_thread(a) * thread_index();
    const index_t blk = kTile * dim_of(a);
    Buffers b{};
    C** order[] = {&b.rows_a, &b.rows_b, &b.panel_a, &b.panel_b, &b.rows_c, &b.rows_d, &b.acc};
    for (C** x : order) *x = p, p += blk;
    b.s = p, p += kTile * kTile;
    b.s2 = p, p += kTile * kTile;
    C** stats[] = {&b.m, &b.l, &b.u, &b.lse, &b.delta};
    for (C** x : stats) *x = p, p += kTile;
    return b;
  }

  // Rows [i0, i0 + n) of operand S at (b, h), times `mul`, as n x dim (row-major).
  template <int S>
  static void load_rows(const Args& a, index_t b, index_t h, index_t i0, index_t n, index_t dim, C mul, C* dst) {
    for (index_t r = 0; r < n; ++r) {
      const T* src = a.template at<S>(b, h, i0 + r);
      C* d = dst + r * dim;
      const index_t st = a.inner[S];
      if (st == 1) {
        KILN_SIMD
        for (index_t x = 0; x < dim; ++x) d[x] = widen(src[x]) * mul;
      } else {
        for (index_t x = 0; x < dim; ++x) d[x] = widen(src[x * st]) * mul;
      }
    }
  }
  // The same rows transposed: dst[x * kTile + r], a panel of dim rows of kTile.
  template <int S>
  static void load_panel(const Args& a, index_t b, index_t h, index_t i0, index_t n, index_t dim, C* dst) {
    for (index_t r = 0; r < n; ++r) {
      const T* src = a.template at<S>(b, h, i0 + r);
      const index_t st = a.inner[S];
      for (index_t x = 0; x < dim; ++x) dst[x * kTile + r] = widen(src[x * st]);
    }
  }
  // Register blocks of the two products: kRows rows of kTile (or kCols) accumulators, 16 vector
  // registers in float (8 in double), so each panel load serves kRows rows.
  static constexpr int kRows = sizeof(C) == 4 ? 4 : 2;
  static constexpr index_t kCols = 64 / (sizeof(C) / 4);

  // The columns of a tile that row r can see: [lo[r], hi[r]) (empty when lo >= hi). Under the
  // causal mask about half of a diagonal tile is hidden, and the products below skip it.
  struct Columns {
    int lo[kTile], hi[kTile];
  };
  // Non-transposed (rows are queries i0 + r, columns keys j0 + c): query i sees the keys
  // [first_key, keys_seen(i)). Transposed (rows keys, columns queries): key j is seen by the
  // queries from first_query(j) on (keys_seen grows with the query), if it is in the window.
  template <bool Transposed>
  static void visible_columns(const Args& a, index_t b, index_t i0, index_t ni, index_t j0, index_t nj, Columns& cols) {
    const index_t nr = Transposed ? nj : ni, nc = Transposed ? ni : nj, first = a.first_key(b);
    for (index_t r = 0; r < nr; ++r) {
      if constexpr (Transposed) {
        const index_t key = j0 + r;
        cols.lo[r] = static_cast<int>(key < first ? nc : std::clamp<index_t>(a.first_query(b, key, Causal) - i0, 0, nc));
        cols.hi[r] = static_cast<int>(nc);
      } else {
        cols.lo[r] = static_cast<int>(std::clamp<index_t>(first - j0, 0, nc));
        cols.hi[r] = static_cast<int>(std::clamp<index_t>(a.keys_seen(b, i0 + r, Causal) - j0, 0, nc));
      }
    }
  }
  // The columns rows [r, r + n) see together: [lo, hi), lo >= hi when none.
  static std::pair<int, int> block_columns(const Columns& cols, index_t r, int n) {
    int lo = static_cast<int>(kTile), hi = 0;
    for (int i = 0; i < n; ++i)
      if (cols.lo[r + i] < cols.hi[r + i]) lo = std::min(lo, cols.lo[r + i]), hi = std::max(hi, cols.hi[r + i]);
    return {lo, hi};
  }

  // s[r * kTile + j] = sum_x rows[r * dim + x] panel[x * kTile + j] for r < nr and the columns
  // the rows see, in pieces of kPiece columns (the others are left as they were: the callers
  // read only seen columns). RB rows by N pieces of accumulators stay in registers.
  static constexpr int kPiece = 16;
  template <int RB, int N>
  static void product_rows(const C* rows, const C* panel, index_t r, index_t dim, int c0, C* s) {
    C acc[RB][N * kPiece] = {};
    for (index_t x = 0; x < dim; ++x) {
      const C* __restrict p = panel + x * kTile + c0;
      for (int i = 0; i < RB; ++i) {
        const C v = rows[(r + i) * dim + x];
        KILN_SIMD
        for (int j = 0; j < N * kPiece; ++j) acc[i][j] += v * p[j];
      }
    }
    for (int i = 0; i < RB; ++i)
      for (int j = 0; j < N * kPiece; ++j) s[(r + i) * kTile + c0 + j] = acc[i][j];
  }
  template <int RB>
  static void product_block(const C* rows, const C* panel, index_t r, index_t dim, const Columns& cols, C* s) {
    static_assert(kTile == 4 * kPiece);
    const auto [lo, hi] = block_columns(cols, r, RB);
    if (lo >= hi) return;
    const int c0 = lo / kPiece * kPiece, n = (hi - c0 + kPiece - 1) / kPiece;
    switch (n) {
      case 1: return product_rows<RB, 1>(rows, panel, r, dim, c0, s);
      case 2: return product_rows<RB, 2>(rows, panel, r, dim, c0, s);
      case 3: return product_rows<RB, 3>(rows, panel, r, dim, c0, s);
      default: return product_rows<RB, 4>(rows, panel, r, dim, c0, s);
    }
  }
  static void product(const C* rows, const C* panel, index_t nr, index_t dim, const Columns& cols, C* s) {
    index_t r = 0;
    for (; r + kRows <= nr; r += kRows) product_block<kRows>(rows, panel, r, dim, cols, s);
    for (; r < nr; ++r) product_block<1>(rows, panel, r, dim, cols, s);
  }
  // acc[r * dim + x] += sum_j w[r * kTile + j] rows[j * dim + x], for r < nr, x < dim and j over
  // the columns the block of rows sees (w is 0 at a row's hidden columns, which are skipped where
  // the whole block hides them): RB rows by CB columns of accumulators in registers at a time,
  // CB the widest of kCols, kCols / 2 and kCols / 4 that fits what is left of the row (a head_dim
  // of 32 or 48 stays in registers), a last ragged piece of fewer columns accumulated in memory.
  template <int RB, index_t CB>
  static void accumulate_block(const C* w, const C* rows, index_t r, int j_lo, int j_hi, index_t dim, index_t x0, C* acc) {
    C o[RB][CB];
    for (int i = 0; i < RB; ++i)
      for (index_t x = 0; x < CB; ++x) o[i][x] = acc[(r + i) * dim + x0 + x];
    for (int j = j_lo; j < j_hi; ++j) {
      const C* __restrict src = rows + j * dim + x0;
      for (int i = 0; i < RB; ++i) {
        const C p = w[(r + i) * kTile + j];
        KILN_SIMD
        for (index_t x = 0; x < CB; ++x) o[i][x] += p * src[x];
      }
    }
    for (int i = 0; i < RB; ++i)
      for (index_t x = 0; x < CB; ++x) acc[(r + i) * dim + x0 + x] = o[i][x];
  }
  template <int RB>
  static void accumulate_rows(const C* w, const C* rows, index_t r, const Columns& cols, index_t dim, C* acc) {
    const auto [j_lo, j_hi] = block_columns(cols, r, RB);
    if (j_lo >= j_hi) return;
    index_t x0 = 0;
    for (; x0 + kCols <= dim; x0 += kCols) accumulate_block<RB, kCols>(w, rows, r, j_lo, j_hi, dim, x0, acc);
    if (x0 + kCols / 2 <= dim) accumulate_block<RB, kCols / 2>(w, rows, r, j_lo, j_hi, dim, x0, acc), x0 += kCols / 2;
    if (x0 + kCols / 4 <= dim) accumulate_block<RB, kCols / 4>(w, rows, r, j_lo, j_hi, dim, x0, acc), x0 += kCols / 4;
    if (x0 == dim) return;
    for (int i = 0; i < RB; ++i)  // the ragged last columns
      for (int j = j_lo; j < j_hi; ++j)
        for (index_t x = x0; x < dim; ++x) acc[(r + i) * dim + x] += w[(r + i) * kTile + j] * rows[j * dim + x];
  }
  static void accumulate(const C* w, const C* rows, index_t nr, const Columns& cols, index_t dim, C* acc) {
    index_t r = 0;
    for (; r + kRows <= nr; r += kRows) accumulate_rows<kRows>(w, rows, r, cols, dim, acc);
    for (; r < nr; ++r) accumulate_rows<1>(w, rows, r, cols, dim, acc);
  }
  static T* out_row(const Args& a, index_t b, index_t h, index_t i, index_t heads, index_t len, index_t dim) {
    return a.out + ((b * heads + h) * len + i) * dim;
  }
  static int threads(const Args& a) {
    return threads_for(a.batch * a.heads * a.q_len * std::max<index_t>(a.kv_len, 1), a.config);
  }

  // Out and Stats: one query tile of one head.
  static void forward_tile(const Args& a, Workspace& ws, index_t b, index_t h, index_t i0) {
    constexpr bool kStats = Desc::part_kind == AttentionPart::Stats;
    const Buffers w = buffers(a, ws);
    const index_t ni = std::min(kTile, a.q_len - i0), hk = h / (a.heads / a.kv_heads);
    const index_t D = a.head_dim, Dv = a.v_dim;
    load_rows<Desc::q_slot>(a, b, h, i0, ni, D, a.scale, w.rows_a);
    if constexpr (kStats) load_rows<Desc::g_slot>(a, b, h, i0, ni, Dv, C(1), w.rows_b);
    std::fill(w.m, w.m + ni, kNegInf);
    std::fill(w.l, w.l + ni, C(0));
    std::fill(w.u, w.u + ni, C(0));
    if constexpr (!kStats) std::fill(w.acc, w.acc + ni * Dv, C(0));
    const index_t kend = a.keys_seen(b, i0 + ni - 1, Causal);
    for (index_t j0 = a.first_key(b); j0 < kend; j0 += kTile) {
      const index_t nj = std::min(kTile, kend - j0);
      Columns cols;
      visible_columns<false>(a, b, i0, ni, j0, nj, cols);
      load_panel<Desc::k_slot>(a, b, hk, j0, nj, D, w.panel_a);
      product(w.rows_a, w.panel_a, ni, D, cols, w.s);
      if constexpr (kStats) {  // g v^T
        load_panel<Desc::v_slot>(a, b, hk, j0, nj, Dv, w.panel_b);
        product(w.rows_b, w.panel_b, ni, Dv, cols, w.s2);
      } else {
        load_rows<Desc::v_slot>(a, b, hk, j0, nj, Dv, C(1), w.rows_c);
      }
      for (index_t r = 0; r < ni; ++r) {
        C* __restrict s = w.s + r * kTile;
        const int lim = cols.hi[r];  // the query sees keys [0, lim) of the tile (j0 >= first_key)
        C mx = kNegInf;
        KILN_SIMD_REDUCE(max, mx)
        for (int j = 0; j < lim; ++j) mx = mx > s[j] ? mx : s[j];
        const C m_new = std::max(w.m[r], mx);
        if (m_new == kNegInf) {  // no key seen yet
          std::fill(s, s + nj, C(0));
          continue;
        }
        const C corr = w.m[r] == kNegInf ? C(0) : std::exp(w.m[r] - m_new);
        // The seen keys' exponentials (kiln's SIMD exp) and their sum, the others 0, in one
        // loop over the tile with a select (the form GCC vectorizes; a loop to lim alone, or
        // exp of a clamped argument, ran scalar).
        C sum = 0, dot = 0;
        KILN_SIMD_REDUCE(+, sum)
        for (int j = 0; j < static_cast<int>(nj); ++j) {
          const C e = j < lim ? math::exp(s[j] - m_new) : C(0);
          s[j] = e;
          sum += e;
        }
        if constexpr (kStats) {
          const C* __restrict dp = w.s2 + r * kTile;
          KILN_SIMD_REDUCE(+, dot)
          for (int j = 0; j < lim; ++j) dot += s[j] * dp[j];
        }
        w.l[r] = w.l[r] * corr + sum;
        w.u[r] = w.u[r] * corr + dot;
        w.m[r] = m_new;
        if constexpr (!kStats)
          for (index_t x = 0; x < Dv; ++x) w.acc[r * Dv + x] *= corr;
      }
      if constexpr (!kStats) accumulate(w.s, w.rows_c, ni, cols, Dv, w.acc);
    }
    for (index_t r = 0; r < ni; ++r) {
      const bool seen = w.l[r] > C(0);
      if constexpr (kStats) {
        C* o = a.stats_out(b, h, i0 + r);
        o[0] = seen ? w.m[r] + std::log(w.l[r]) : kNegInf;
        o[1] = seen ? w.u[r] / w.l[r] : C(0);
      } else {
        T* o = out_row(a, b, h, i0 + r, a.heads, a.q_len, Dv);
        const C inv = seen ? C(1) / w.l[r] : C(0);
        for (index_t x = 0; x < Dv; ++x) o[x] = narrow<T>(w.acc[r * Dv + x] * inv);
      }
    }
  }

  // The probabilities p = exp(s - lse) of a tile of scores in place (0 where hidden or where
  // the query sees no key), then, WithDs, with dp = g v^T in s2, ds = p (dp - delta) in s2 (0
  // where p is). Row r is query i0 + r, column c key j0 + c; Transposed: row r is key j0 + r,
  // column c query i0 + c. Every column below nc is written; the options are template arguments
  // so that each loop has no branch and vectorizes.
  template <bool Transposed, bool WithDs>
  static void probabilities(const Buffers& w, index_t nr, index_t nc, const Columns& cols) {
    const C* __restrict lse = w.lse;
    const C* __restrict delta = w.delta;
    for (index_t r = 0; r < nr; ++r) {
      C* __restrict s = w.s + r * kTile;
      C* __restrict d = w.s2 + r * kTile;
      const int lo = cols.lo[r], hi = cols.hi[r];
      if constexpr (Transposed) {  // each column has its query's statistics
        KILN_SIMD
        for (int c = 0; c < static_cast<int>(nc); ++c) {
          const bool visible = c >= lo && c < hi && lse[c] != kNegInf;
          const C p = visible ? math::exp(s[c] - lse[c]) : C(0);
          s[c] = p;
          if constexpr (WithDs) d[c] = visible ? p * (d[c] - delta[c]) : C(0);
        }
      } else {
        const C lse_r = lse[r], delta_r = delta[r];
        const bool any = lse_r != kNegInf;
        KILN_SIMD
        for (int c = 0; c < static_cast<int>(nc); ++c) {
          const bool visible = any && c >= lo && c < hi;
          const C p = visible ? math::exp(s[c] - lse_r) : C(0);
          s[c] = p;
          if constexpr (WithDs) d[c] = visible ? p * (d[c] - delta_r) : C(0);
        }
      }
    }
  }
  template <int S>
  static void load_stats(const Args& a, index_t b, index_t h, index_t i0, index_t n, C* lse, C* delta) {
    for (index_t r = 0; r < n; ++r) {
      const C* p = a.template stats_at<S>(b, h, i0 + r);
      lse[r] = p[0];
      delta[r] = p[a.inner[S]];
    }
  }

  // GradQ: one query tile of one head.
  static void grad_q_tile(const Args& a, Workspace& ws, index_t b, index_t h, index_t i0) {
    const Buffers w = buffers(a, ws);
    const index_t ni = std::min(kTile, a.q_len - i0), hk = h / (a.heads / a.kv_heads);
    const index_t D = a.head_dim, Dv = a.v_dim;
    load_rows<Desc::q_slot>(a, b, h, i0, ni, D, a.scale, w.rows_a);
    load_rows<Desc::g_slot>(a, b, h, i0, ni, Dv, C(1), w.rows_b);
    load_stats<Desc::stats_slot>(a, b, h, i0, ni, w.lse, w.delta);
    std::fill(w.acc, w.acc + ni * D, C(0));
    const index_t kend = a.keys_seen(b, i0 + ni - 1, Causal);
    for (index_t j0 = a.first_key(b); j0 < kend; j0 += kTile) {
      const index_t nj = std::min(kTile, kend - j0);
      Columns cols;
      visible_columns<false>(a, b, i0, ni, j0, nj, cols);
      load_panel<Desc::k_slot>(a, b, hk, j0, nj, D, w.panel_a);
      product(w.rows_a, w.panel_a, ni, D, cols, w.s);
      load_panel<Desc::v_slot>(a, b, hk, j0, nj, Dv, w.panel_b);
      product(w.rows_b, w.panel_b, ni, Dv, cols, w.s2);
      probabilities<false, true>(w, ni, nj, cols);
      load_rows<Desc::k_slot>(a, b, hk, j0, nj, D, C(1), w.rows_c);
      accumulate(w.s2, w.rows_c, ni, cols, D, w.acc);
    }
    for (index_t r = 0; r < ni; ++r) {
      T* o = out_row(a, b, h, i0 + r, a.heads, a.q_len, D);
      for (index_t x = 0; x < D; ++x) o[x] = narrow<T>(w.acc[r * D + x] * a.scale);
    }
  }

  // GradK and GradV: one key tile of one key/value head, summed over its query heads.
  static void grad_kv_tile(const Args& a, Workspace& ws, index_t b, index_t hk, index_t j0) {
    constexpr bool kGradK = Desc::part_kind == AttentionPart::GradK;
    const Buffers w = buffers(a, ws);
    const index_t nj = std::min(kTile, a.kv_len - j0), group = a.heads / a.kv_heads;
    const index_t D = a.head_dim, Dv = a.v_dim, dim = kGradK ? D : Dv;
    load_rows<Desc::k_slot>(a, b, hk, j0, nj, D, a.scale, w.rows_a);  // s^T = (scale k) q^T
    if constexpr (kGradK) load_rows<Desc::v_slot>(a, b, hk, j0, nj, Dv, C(1), w.rows_b);
    std::fill(w.acc, w.acc + nj * dim, C(0));
    const index_t first = a.first_query(b, j0, Causal);
    for (index_t h = hk * group; h < (hk + 1) * group; ++h)
      for (index_t i0 = first; i0 < a.q_len; i0 += kTile) {
        const index_t ni = std::min(kTile, a.q_len - i0);
        Columns cols;
        visible_columns<true>(a, b, i0, ni, j0, nj, cols);
        load_stats<Desc::stats_slot>(a, b, h, i0, ni, w.lse, w.delta);
        load_panel<Desc::q_slot>(a, b, h, i0, ni, D, w.panel_a);
        product(w.rows_a, w.panel_a, nj, D, cols, w.s);
        if constexpr (kGradK) {
          load_panel<Desc::g_slot>(a, b, h, i0, ni, Dv, w.panel_b);
          product(w.rows_b, w.panel_b, nj, Dv, cols, w.s2);  // (g v^T)^T
          probabilities<true, true>(w, nj, ni, cols);
          load_rows<Desc::q_slot>(a, b, h, i0, ni, D, C(1), w.rows_c);
          accumulate(w.s2, w.rows_c, nj, cols, D, w.acc);
        } else {
          probabilities<true, false>(w, nj, ni, cols);
          load_rows<Desc::g_slot>(a, b, h, i0, ni, Dv, C(1), w.rows_c);
          accumulate(w.s, w.rows_c, nj, cols, Dv, w.acc);
        }
      }
    const C mul = kGradK ? a.scale : C(1);
    for (index_t r = 0; r < nj; ++r) {
      T* o = out_row(a, b, hk, j0 + r, a.kv_heads, a.kv_len, dim);
      for (index_t x = 0; x < dim; ++x) o[x] = narrow<T>(w.acc[r * dim + x] * mul);
    }
  }

  static void run(const Args& a, Workspace& ws) {
    constexpr auto part = Desc::part_kind;
    if constexpr (part == AttentionPart::GradK || part == AttentionPart::GradV) {
      const index_t tiles = (a.kv_len + kTile - 1) / kTile;
      parallel_for(a.batch * a.kv_heads * tiles, threads(a), [&](index_t t) {
        grad_kv_tile(a, ws, t / (a.kv_heads * tiles), t / tiles % a.kv_heads, t % tiles * kTile);
      });
    } else {
      const index_t tiles = (a.q_len + kTile - 1) / kTile;
      parallel_for(a.batch * a.heads * tiles, threads(a), [&](index_t t) {
        const index_t b = t / (a.heads * tiles), h = t / tiles % a.heads, i0 = t % tiles * kTile;
        if constexpr (part == AttentionPart::GradQ) grad_q_tile(a, ws, b, h, i0);
        else forward_tile(a, ws, b, h, i0);
      });
    }
  }

  // MaxAutotune's candidates: one thread or all.
  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }
};

}  // namespace kiln::cpu
