// kiln: the attention kind on CUDA (expr/ops/attention.hpp; lower/args.hpp's AttentionArgs),
// the general kernel: every part, every element type, any strides, head_dim up to what shared
// memory holds (256 in f32, bf16 and f16, 256 in f64 with smaller tiles).
// A block owns a tile of `tile` queries of one head (Out, Stats, GradQ) or of `tile` keys of one
// key/value head (GradK, GradV, over every query head of its group) and walks the other side in
// tiles of the same size, as the CPU kernel does (backend/cpu/attention_kernel.hpp): operand
// tiles are widened into shared memory (rows padded by one element against bank conflicts), the
// tile x tile scores are products over shared memory, one thread per query row keeps the online
// softmax's running max and sum, and the accumulator stays in shared memory. The maths runs in
// compute_t<T> on CUDA cores; no tensor cores.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kiln/backend/cuda/attention_tc.cuh"
#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/core/errors.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

inline constexpr int kAttentionThreads = 256;
__device__ __forceinline__ index_t least(index_t a, index_t b) { return a < b ? a : b; }

// The shared-memory tiles of one block, carved from `base` (C elements).
template <class C>
struct AttentionTiles {
  C *t0, *t1, *t2, *t3;  // operand tiles, tile x ld
  C *s, *s2;             // scores and their second product, tile x (tile + 1)
  C *acc;                // the accumulator, tile x max(D, Dv)
  C *m, *l, *u, *corr;   // per row of the tile
  __device__ AttentionTiles(C* base, index_t tile, index_t ld, index_t dim) {
    C** order[] = {&t0, &t1, &t2, &t3};
    for (C** x : order) *x = base, base += tile * ld;
    s = base, base += tile * (tile + 1);
    s2 = base, base += tile * (tile + 1);
    acc = base, base += tile * dim;
    C** rows[] = {&m, &l, &u, &corr};
    for (C** x : rows) *x = base, base += tile;
  }
  static std::size_t bytes(index_t tile, index_t ld, index_t dim) {
    return static_cast<std::size_t>(4 * tile * ld + 2 * tile * (tile + 1) + tile * dim + 4 * tile) * sizeof(C);
  }
};

template <class T, int Part, bool Causal, int NL, class I>
struct AttentionDevice {
  using Desc = lower::AttentionKernel<T, Part, Causal, NL, I>;
  using Args = lower::AttentionArgs<T, NL, I>;
  using C = compute_t<T>;
  index_t tile, ld, dim;  // dim: max(D, Dv), ld = dim + 1

  // Rows [i0, i0 + n) of operand S at (b, h), times mul, into dst (n x dim, row stride ld).
  template <int S>
  __device__ void load(const Args& a, index_t b, index_t h, index_t i0, index_t n, index_t cols, C mul, C* dst) const {
    for (index_t e = threadIdx.x; e < n * cols; e += blockDim.x) {
      const index_t r = e / cols, x = e % cols;
      dst[r * ld + x] = widen(a.template at<S>(b, h, i0 + r)[x * a.inner[S]]) * mul;
    }
  }
  // s[r, c] = sum_x A[r, x] B[c, x] for r < nr, c < nc (A and B of row stride ld).
  __device__ void product(const C* A, const C* B, index_t nr, index_t nc, index_t cols, C* s) const {
    if (cols == 32) return product_unrolled<32>(A, B, static_cast<int>(nr), static_cast<int>(nc), s);
    if (cols == 64) return product_unrolled<64>(A, B, static_cast<int>(nr), static_cast<int>(nc), s);
    for (index_t e = threadIdx.x; e < nr * nc; e += blockDim.x) {
      const index_t r = e / nc, c = e % nc;
      C acc = 0;
      for (index_t x = 0; x < cols; ++x) acc += A[r * ld + x] * B[c * ld + x];
      s[r * (tile + 1) + c] = acc;
    }
  }
  // acc[r, x] = acc[r, x] * (corr ? corr[r] : 1) + sum_c w[r, c] B[c, x], r < nr, x < cols.
  __device__ void accumulate(const C* w, const C* B, index_t nr, index_t nc, index_t cols, const C* corr, C* acc) const {
    if (cols == 32) return accumulate_unrolled<32>(w, B, static_cast<int>(nr), static_cast<int>(nc), corr, acc);
    if (cols == 64) return accumulate_unrolled<64>(w, B, static_cast<int>(nr), static_cast<int>(nc), corr, acc);
    for (index_t e = threadIdx.x; e < nr * cols; e += blockDim.x) {
      const index_t r = e / cols, x = e % cols;
      C v = corr ? acc[r * dim + x] * corr[r] : acc[r * dim + x];
      for (index_t c = 0; c < nc; ++c) v += w[r * (tile + 1) + c] * B[c * ld + x];
      acc[r * dim + x] = v;
    }
  }
  // product() and accumulate() for a head_dim known at compile time: each thread computes kIlp
  // entries at once (e, e + blockDim.x, ...), the loop over head_dim unrolled, so their loads
  // from shared memory overlap instead of waiting one after another. Every entry is summed in
  // the same order as the general loop's, so the results are the same to the bit. An entry past
  // the end is computed on a clamped index (reading no memory another thread writes) and not
  // stored.
  static constexpr int kIlp = 4;
  template <int Cols>
  __device__ void product_unrolled(const C* A, const C* B, int nr, int nc, C* s) const {
    const int n = nr * nc, stride = static_cast<int>(blockDim.x);
    for (int e0 = static_cast<int>(threadIdx.x); e0 < n; e0 += kIlp * stride) {
      const C* a[kIlp];
      const C* b[kIlp];
      C acc[kIlp];
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        const int e = ::min(e0 + k * stride, n - 1), r = e / nc;
        a[k] = A + r * ld, b[k] = B + (e - r * nc) * ld, acc[k] = 0;
      }
#pragma unroll
      for (int x = 0; x < Cols; ++x)
#pragma unroll
        for (int k = 0; k < kIlp; ++k) acc[k] += a[k][x] * b[k][x];
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        const int e = e0 + k * stride, r = e / nc;
        if (e < n) s[r * (tile + 1) + (e - r * nc)] = acc[k];
      }
    }
  }
  template <int Cols>
  __device__ void accumulate_unrolled(const C* w, const C* B, int nr, int nc, const C* corr, C* acc) const {
    const int n = nr * Cols, stride = static_cast<int>(blockDim.x);
    for (int e0 = static_cast<int>(threadIdx.x); e0 < n; e0 += kIlp * stride) {
      const C* wr[kIlp];
      int x[kIlp];
      C v[kIlp];
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        const int e = ::min(e0 + k * stride, n - 1), r = e / Cols;
        x[k] = e % Cols, wr[k] = w + r * (tile + 1), v[k] = 0;
        if (e0 + k * stride < n) v[k] = corr ? acc[r * dim + x[k]] * corr[r] : acc[r * dim + x[k]];
      }
#pragma unroll 4
      for (int c = 0; c < nc; ++c)
#pragma unroll
        for (int k = 0; k < kIlp; ++k) v[k] += wr[k][c] * B[c * ld + x[k]];
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        const int e = e0 + k * stride;
        if (e < n) acc[e / Cols * dim + x[k]] = v[k];
      }
    }
  }

  // p = exp(s - lse) in place (0 where masked or where the query sees no key) and, with_ds,
  // ds = p (s2 - delta) in s2. transposed: rows are keys j0 + r, columns queries i0 + c.
  __device__ void probabilities(const Args& a, AttentionTiles<C>& w, index_t b, index_t i0, index_t ni, index_t j0, index_t nj,
                                bool transposed, bool with_ds) const {
    const index_t nr = transposed ? nj : ni, nc = transposed ? ni : nj;
    for (index_t e = threadIdx.x; e < nr * nc; e += blockDim.x) {
      const index_t r = e / nc, c = e % nc;
      const index_t qi = transposed ? c : r, kj = transposed ? r : c;
      const C lse = w.m[qi];
      C& s = w.s[r * (tile + 1) + c];
      const bool visible = a.visible(b, i0 + qi, j0 + kj, Causal) && !::isinf(lse);
      s = visible ? ::exp(s - lse) : C(0);
      if (with_ds) {
        C& d = w.s2[r * (tile + 1) + c];
        d = s * (d - w.l[qi]);
      }
    }
  }
  // lse into m, delta into l, for queries [i0, i0 + n).
  __device__ void load_stats(const Args& a, AttentionTiles<C>& w, index_t b, index_t h, index_t i0, index_t n) const {
    constexpr int S = Desc::stats_slot;
    for (index_t r = threadIdx.x; r < n; r += blockDim.x) {
      const C* p = a.template stats_at<S>(b, h, i0 + r);
      w.m[r] = p[0];
      w.l[r] = p[a.inner[S]];
    }
  }

  __device__ void forward(const Args& a, AttentionTiles<C>& w, index_t b, index_t h, index_t i0) const {
    constexpr bool kStats = Desc::part_kind == AttentionPart::Stats;
    const C neg_inf = -INFINITY;
    const index_t ni = least(tile, a.q_len - i0), hk = h / (a.heads / a.kv_heads), D = a.head_dim, Dv = a.v_dim;
    load<Desc::q_slot>(a, b, h, i0, ni, D, a.scale, w.t0);
    if constexpr (kStats) load<Desc::g_slot>(a, b, h, i0, ni, Dv, C(1), w.t3);
    for (index_t r = threadIdx.x; r < ni; r += blockDim.x) w.m[r] = neg_inf, w.l[r] = 0, w.u[r] = 0;
    if constexpr (!kStats)
      for (index_t e = threadIdx.x; e < ni * dim; e += blockDim.x) w.acc[e] = 0;
    const index_t kend = a.keys_seen(b, i0 + ni - 1, Causal);
    for (index_t j0 = a.first_key(b); j0 < kend; j0 += tile) {
      const index_t nj = least(tile, kend - j0);
      __syncthreads();  // the previous tile's readers are done
      load<Desc::k_slot>(a, b, hk, j0, nj, D, C(1), w.t1);
      load<Desc::v_slot>(a, b, hk, j0, nj, Dv, C(1), w.t2);
      __syncthreads();
      product(w.t0, w.t1, ni, nj, D, w.s);
      if constexpr (kStats) product(w.t3, w.t2, ni, nj, Dv, w.s2);  // g v^T
      __syncthreads();
      for (index_t r = threadIdx.x; r < ni; r += blockDim.x) {
        C* s = w.s + r * (tile + 1);
        const index_t seen = a.keys_seen(b, i0 + r, Causal) - j0, lim = seen < 0 ? 0 : (seen > nj ? nj : seen);
        C mx = neg_inf;
        for (index_t j = 0; j < lim; ++j) mx = ::fmax(mx, s[j]);
        const C m_new = ::fmax(w.m[r], mx);
        if (::isinf(m_new)) {  // no key seen yet
          for (index_t j = 0; j < nj; ++j) s[j] = 0;
          w.corr[r] = 1;
          continue;
        }
        const C corr = ::isinf(w.m[r]) ? C(0) : ::exp(w.m[r] - m_new);
        C sum = 0, dot = 0;
        for (index_t j = 0; j < nj; ++j) {
          s[j] = j < lim ? ::exp(s[j] - m_new) : C(0);
          sum += s[j];
          if constexpr (kStats) dot += s[j] * w.s2[r * (tile + 1) + j];
        }
        w.l[r] = w.l[r] * corr + sum;
        w.u[r] = w.u[r] * corr + dot;
        w.m[r] = m_new;
        w.corr[r] = corr;
      }
      __syncthreads();
      if constexpr (!kStats) accumulate(w.s, w.t2, ni, nj, Dv, w.corr, w.acc);
    }
    __syncthreads();
    if constexpr (kStats) {
      for (index_t r = threadIdx.x; r < ni; r += blockDim.x) {
        C* o = a.stats_out(b, h, i0 + r);
        const bool seen = w.l[r] > C(0);
        o[0] = seen ? w.m[r] + ::log(w.l[r]) : neg_inf;
        o[1] = seen ? w.u[r] / w.l[r] : C(0);
      }
    } else {
      for (index_t e = threadIdx.x; e < ni * Dv; e += blockDim.x) {
        const index_t r = e / Dv, x = e % Dv;
        const C l = w.l[r];
        a.out[((b * a.heads + h) * a.q_len + i0 + r) * Dv + x] = narrow<T>(l > C(0) ? w.acc[r * dim + x] / l : C(0));
      }
    }
  }

  __device__ void grad_q(const Args& a, AttentionTiles<C>& w, index_t b, index_t h, index_t i0) const {
    const index_t ni = least(tile, a.q_len - i0), hk = h / (a.heads / a.kv_heads), D = a.head_dim, Dv = a.v_dim;
    load<Desc::q_slot>(a, b, h, i0, ni, D, a.scale, w.t0);
    load<Desc::g_slot>(a, b, h, i0, ni, Dv, C(1), w.t3);
    load_stats(a, w, b, h, i0, ni);
    for (index_t e = threadIdx.x; e < ni * dim; e += blockDim.x) w.acc[e] = 0;
    const index_t kend = a.keys_seen(b, i0 + ni - 1, Causal);
    for (index_t j0 = a.first_key(b); j0 < kend; j0 += tile) {
      const index_t nj = least(tile, kend - j0);
      __syncthreads();
      load<Desc::k_slot>(a, b, hk, j0, nj, D, C(1), w.t1);
      load<Desc::v_slot>(a, b, hk, j0, nj, Dv, C(1), w.t2);
      __syncthreads();
      product(w.t0, w.t1, ni, nj, D, w.s);
      product(w.t3, w.t2, ni, nj, Dv, w.s2);
      __syncthreads();
      probabilities(a, w, b, i0, ni, j0, nj, false, true);
      __syncthreads();
      accumulate(w.s2, w.t1, ni, nj, D, nullptr, w.acc);
    }
    __syncthreads();
    for (index_t e = threadIdx.x; e < ni * D; e += blockDim.x) {
      const index_t r = e / D, x = e % D;
      a.out[((b * a.heads + h) * a.q_len + i0 + r) * D + x] = narrow<T>(w.acc[r * dim + x] * a.scale);
    }
  }

  __device__ void grad_kv(const Args& a, AttentionTiles<C>& w, index_t b, index_t hk, index_t j0) const {
    constexpr bool kGradK = Desc::part_kind == AttentionPart::GradK;
    const index_t nj = least(tile, a.kv_len - j0), group = a.heads / a.kv_heads, D = a.head_dim, Dv = a.v_dim;
    const index_t cols = kGradK ? D : Dv;
    load<Desc::k_slot>(a, b, hk, j0, nj, D, a.scale, w.t0);  // s^T = (scale k) q^T
    if constexpr (kGradK) load<Desc::v_slot>(a, b, hk, j0, nj, Dv, C(1), w.t1);
    for (index_t e = threadIdx.x; e < nj * dim; e += blockDim.x) w.acc[e] = 0;
    const index_t first = a.first_query(b, j0, Causal);
    for (index_t h = hk * group; h < (hk + 1) * group; ++h)
      for (index_t i0 = first; i0 < a.q_len; i0 += tile) {
        const index_t ni = least(tile, a.q_len - i0);
        __syncthreads();
        load<Desc::q_slot>(a, b, h, i0, ni, D, C(1), w.t2);
        load<Desc::g_slot>(a, b, h, i0, ni, Dv, C(1), w.t3);
        load_stats(a, w, b, h, i0, ni);
        __syncthreads();
        product(w.t0, w.t2, nj, ni, D, w.s);
        if constexpr (kGradK) product(w.t1, w.t3, nj, ni, Dv, w.s2);  // (g v^T)^T
        __syncthreads();
        probabilities(a, w, b, i0, ni, j0, nj, true, kGradK);
        __syncthreads();
        if constexpr (kGradK) accumulate(w.s2, w.t2, nj, ni, D, nullptr, w.acc);
        else accumulate(w.s, w.t3, nj, ni, Dv, nullptr, w.acc);
      }
    __syncthreads();
    const C mul = kGradK ? a.scale : C(1);
    for (index_t e = threadIdx.x; e < nj * cols; e += blockDim.x) {
      const index_t r = e / cols, x = e % cols;
      a.out[((b * a.kv_heads + hk) * a.kv_len + j0 + r) * cols + x] = narrow<T>(w.acc[r * dim + x] * mul);
    }
  }
};

template <class T, int Part, bool Causal, int NL, class I>
__global__ void __launch_bounds__(kAttentionThreads) attention_kernel(const lower::AttentionArgs<T, NL, I> a, index_t tile) {
  using Dev = AttentionDevice<T, Part, Causal, NL, I>;
  using C = typename Dev::C;
  extern __shared__ double attention_smem[];  // double: aligned for every compute type
  await_previous_kernel();
  const index_t dim = a.head_dim > a.v_dim ? a.head_dim : a.v_dim;
  const Dev dev{tile, dim + 1, dim};
  AttentionTiles<C> w(reinterpret_cast<C*>(attention_smem), tile, dim + 1, dim);
  constexpr auto part = Dev::Desc::part_kind;
  if constexpr (part == AttentionPart::GradK || part == AttentionPart::GradV) {
    const index_t tiles = (a.kv_len + tile - 1) / tile, t = blockIdx.x;
    dev.grad_kv(a, w, t / (a.kv_heads * tiles), t / tiles % a.kv_heads, t % tiles * tile);
  } else {
    const index_t tiles = (a.q_len + tile - 1) / tile, t = blockIdx.x;
    const index_t b = t / (a.heads * tiles), h = t / tiles % a.heads, i0 = t % tiles * tile;
    if constexpr (part == AttentionPart::GradQ) dev.grad_q(a, w, b, h, i0);
    else dev.forward(a, w, b, h, i0);
  }
}


// The decode path (launch.hpp's decode_chunks): block (b, hk, c) takes keys [c kDecodeChunk,
// (c + 1) kDecodeChunk) of key/value head hk and every query row that reads it (R = q_len x
// the group's query heads, row r being query r % q_len of head hk group + r / q_len). Each key
// row is read once, by a group of lanes in 16-byte pieces (or by one thread where rows are not
// aligned), for all R scores (q rows in shared memory); a warp per row takes its max and sum;
// then thread t accumulates element t % Dv (or a pair of elements) of the weighted sum of v over
// the keys congruent to t / Dv, and shared memory adds those up. The partial (Dv sums, max,
// sum) goes to scratch, and attention_combine_kernel merges a row's chunks:
//   out = sum_c exp(m_c - M) acc_c / sum_c exp(m_c - M) l_c,   M = max_c m_c.
template <class T, bool Causal, int NL, class I>
__global__ void __launch_bounds__(kAttentionThreads) attention_decode_kernel(const lower::AttentionArgs<T, NL, I> a,
                                                                             compute_t<T>* partial, bool vec) {
  using C = compute_t<T>;
  using Desc = lower::AttentionKernel<T, 0, Causal, NL, I>;
  extern __shared__ double attention_smem[];
  await_previous_kernel();
  const index_t chunks = (a.kv_len + kDecodeChunk - 1) / kDecodeChunk, group = a.heads / a.kv_heads;
  const index_t c = blockIdx.x % chunks, hk = blockIdx.x / chunks % a.kv_heads, b = blockIdx.x / (chunks * a.kv_heads);
  const index_t j0 = c * kDecodeChunk, nj = least(kDecodeChunk, a.kv_len - j0);
  // vec: k's and v's rows are 16-byte aligned with unit stride (checked on the host): a key row
  // is read in 16-byte pieces, and v in pairs of elements, a thread per pair.
  const index_t R = a.q_len * group, D = a.head_dim, Dv = a.v_dim, width = vec ? 2 : 1, lanes = blockDim.x / (Dv / width);
  C* qs = reinterpret_cast<C*>(attention_smem);  // R x D
  C* s = qs + R * D;                              // R x kDecodeChunk
  C* red = s + R * kDecodeChunk;                  // lanes x R x Dv
  C* row_m = red + lanes * R * Dv;                // R
  C* row_l = row_m + R;                           // R
  for (index_t e = threadIdx.x; e < R * D; e += blockDim.x) {
    const index_t r = e / D, x = e % D;
    qs[e] = widen(a.template at<Desc::q_slot>(b, hk * group + r / a.q_len, r % a.q_len)[x * a.inner[Desc::q_slot]]) * a.scale;
  }
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  auto store = [&](index_t j, int r, C dot) {
    s[r * kDecodeChunk + j] = a.visible(b, r % a.q_len, j0 + j, Causal) ? dot : C(-INFINITY);
  };
  constexpr int E = 16 / sizeof(T);  // elements of a 16-byte piece
  const int per_key = static_cast<int>(D / E);
  if (vec && per_key > 0 && per_key <= 32 && (per_key & (per_key - 1)) == 0) {
    // per_key lanes read one key row in 16-byte pieces (a warp reads 32 / per_key rows whole,
    // coalesced); each lane's partial dot products are summed over its group by shuffles.
    const int keys_per_warp = 32 / per_key, piece = lane % per_key;
    for (index_t base = warp * keys_per_warp; base < nj; base += warps * keys_per_warp) {
      const index_t j = base + lane / per_key;
      union {
        uint4 raw;
        T v[E];
      } k16;
      k16.raw = j < nj ? *reinterpret_cast<const uint4*>(a.template at<Desc::k_slot>(b, hk, j0 + j) + piece * E) : uint4{};
#pragma unroll
      for (int r = 0; r < kDecodeRows; ++r) {
        if (r >= R) break;
        C dot = 0;
#pragma unroll
        for (int e = 0; e < E; ++e) dot += qs[r * D + piece * E + e] * widen(k16.v[e]);
        for (int o = per_key / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
        if (piece == 0 && j < nj) store(j, r, dot);
      }
    }
  } else {
    for (index_t j = threadIdx.x; j < nj; j += blockDim.x) {  // a thread per key
      const T* kr = a.template at<Desc::k_slot>(b, hk, j0 + j);
      C dot[kDecodeRows] = {};  // registers: the loops over rows are unrolled, guarded by r < R
      for (index_t x = 0; x < D; ++x) {
        const C kx = widen(kr[x * a.inner[Desc::k_slot]]);
#pragma unroll
        for (int r = 0; r < kDecodeRows; ++r)
          if (r < R) dot[r] += qs[r * D + x] * kx;
      }
#pragma unroll
      for (int r = 0; r < kDecodeRows; ++r)
        if (r < R) store(j, r, dot[r]);
    }
  }
  __syncthreads();
  for (index_t r = warp; r < R; r += warps) {
    C* sr = s + r * kDecodeChunk;
    C mx = -INFINITY;
    for (index_t j = lane; j < nj; j += 32) mx = ::fmax(mx, sr[j]);
    for (int o = 16; o > 0; o /= 2) mx = ::fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    C sum = 0;
    for (index_t j = lane; j < nj; j += 32) {
      const C p = ::isinf(mx) ? C(0) : ::exp(sr[j] - mx);  // exp(-inf) = 0 for masked keys
      sr[j] = p;
      sum += p;
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) row_m[r] = mx, row_l[r] = sum;
  }
  __syncthreads();
  const index_t x = threadIdx.x % (Dv / width) * width, kl = threadIdx.x / (Dv / width);
  if (kl < lanes) {
    C acc[kDecodeRows][2] = {};
    for (index_t j = kl; j < nj; j += lanes) {
      const T* vr = a.template at<Desc::v_slot>(b, hk, j0 + j);
      C vx[2];
      if (vec) {
        struct alignas(2 * sizeof(T)) Pair {
          T v[2];
        } pair = *reinterpret_cast<const Pair*>(vr + x);
        vx[0] = widen(pair.v[0]), vx[1] = widen(pair.v[1]);
      } else {
        vx[0] = widen(vr[x * a.inner[Desc::v_slot]]), vx[1] = 0;
      }
#pragma unroll
      for (int r = 0; r < kDecodeRows; ++r)
        if (r < R) acc[r][0] += s[r * kDecodeChunk + j] * vx[0], acc[r][1] += s[r * kDecodeChunk + j] * vx[1];
    }
#pragma unroll
    for (int r = 0; r < kDecodeRows; ++r)
      if (r < R)
        for (index_t e = 0; e < width; ++e) red[(kl * R + r) * Dv + x + e] = acc[r][e];
  }
  __syncthreads();
  for (index_t e = threadIdx.x; e < R * Dv; e += blockDim.x) {
    const index_t r = e / Dv, xx = e % Dv;
    C sum = 0;
    for (index_t l = 0; l < lanes; ++l) sum += red[(l * R + r) * Dv + xx];
    const index_t h = hk * group + r / a.q_len, i = r % a.q_len;
    C* p = partial + (((b * a.heads + h) * a.q_len + i) * chunks + c) * (Dv + 2);
    p[xx] = sum;
    if (xx == 0) p[Dv] = row_m[r], p[Dv + 1] = row_l[r];
  }
}

template <class T, int NL, class I>
__global__ void attention_combine_kernel(const lower::AttentionArgs<T, NL, I> a, const compute_t<T>* partial) {
  using C = compute_t<T>;
  await_previous_kernel();
  const index_t chunks = (a.kv_len + kDecodeChunk - 1) / kDecodeChunk, Dv = a.v_dim, row = blockIdx.x;
  const C* p = partial + row * chunks * (Dv + 2);
  C M = -INFINITY;
  for (index_t c = 0; c < chunks; ++c) M = ::fmax(M, p[c * (Dv + 2) + Dv]);
  C L = 0;
  if (!::isinf(M))
    for (index_t c = 0; c < chunks; ++c) L += p[c * (Dv + 2) + Dv + 1] * ::exp(p[c * (Dv + 2) + Dv] - M);
  for (index_t x = threadIdx.x; x < Dv; x += blockDim.x) {
    C acc = 0;
    if (L > C(0))
      for (index_t c = 0; c < chunks; ++c) acc += p[c * (Dv + 2) + x] * ::exp(p[c * (Dv + 2) + Dv] - M);
    a.out[row * Dv + x] = narrow<T>(L > C(0) ? acc / L : C(0));
  }
}

template <class Desc>
struct AttentionCuda;
template <class T, int Part, bool Causal, int NL, class I>
struct AttentionCuda<lower::AttentionKernel<T, Part, Causal, NL, I>> {
  using Desc = lower::AttentionKernel<T, Part, Causal, NL, I>;
  using Args = lower::AttentionArgs<T, NL, I>;
  using C = compute_t<T>;
  static constexpr std::size_t kMaxShared = 200 * 1024;

  // Whether loads [first, last] have unit stride along head_dim and rows that start 16-byte
  // aligned (the pointer and every stride over batch, head and position), so a row can be read
  // in 16-byte pieces.
  static bool rows_aligned(const Args& a, int first, int last) {
    for (int s = first; s <= last; ++s) {
      if (a.inner[s] != 1 || reinterpret_cast<std::uintptr_t>(a.ptr[s]) % 16 != 0) return false;
      for (int d = 0; d < 3; ++d)
        if (a.outer[s][d] * static_cast<index_t>(sizeof(T)) % 16 != 0) return false;
    }
    return true;
  }

  static void decode(const Args& a, cudaStream_t stream, void* scratch) {
    const index_t chunks = decode_chunks(a), R = a.q_len * (a.heads / a.kv_heads);
    // 16-byte pieces of k's rows and pairs of v's.
    const bool vec = a.head_dim * sizeof(T) % 16 == 0 && a.v_dim % 2 == 0 && rows_aligned(a, Desc::k_slot, Desc::v_slot);
    const index_t lanes = kAttentionThreads / (vec ? a.v_dim / 2 : a.v_dim);
    const std::size_t smem = static_cast<std::size_t>(R * a.head_dim + R * kDecodeChunk + lanes * R * a.v_dim + 2 * R) * sizeof(C);
    constexpr auto kernel = &attention_decode_kernel<T, Causal, NL, I>;
    allow_dynamic_smem<kernel>(smem);
    auto* partial = static_cast<C*>(scratch);
    launch_after_previous<kernel>(dim3(static_cast<unsigned>(a.batch * a.kv_heads * chunks)), dim3(kAttentionThreads), smem,
                                  stream, a, partial, vec);
    const auto threads = static_cast<unsigned>(std::clamp<index_t>((a.v_dim + 31) / 32 * 32, 32, 256));
    launch_after_previous<&attention_combine_kernel<T, NL, I>>(dim3(static_cast<unsigned>(a.batch * a.heads * a.q_len)),
                                                             dim3(threads), 0, stream, a, static_cast<const C*>(partial));
    KILN_CUDA_CHECK(cudaGetLastError());
  }

  // The tensor-core forward (attention_tc.cuh): 16-bit types, head_dim 64 or 128 for q, k and
  // v, each operand's rows 16-byte aligned with unit stride along head_dim, and sm_80 code.
  template <int D>
  static bool tensor_cores(const Args& a, cudaStream_t stream) {
    if (a.head_dim != D || a.v_dim != D || !rows_aligned(a, Desc::q_slot, Desc::v_slot)) return false;
    constexpr auto kernel = &attention_tc_kernel<T, D, Causal, NL, I>;
    if (kernel_attributes<kernel>().ptxVersion < 80) return false;
    constexpr std::size_t smem = attention_tc_smem<D>;
    allow_dynamic_smem<kernel>(smem);
    const index_t blocks = a.batch * a.heads * ((a.q_len + kAttnTcRows - 1) / kAttnTcRows);
    launch_after_previous<kernel>(dim3(static_cast<unsigned>(blocks)), dim3(kAttnTcThreads), smem, stream, a);
    KILN_CUDA_CHECK(cudaGetLastError());
    return true;
  }

  static void run(const Args& a, const lower::LaunchConfig&, cudaStream_t stream, void* scratch) {
    constexpr auto part = Desc::part_kind;
    constexpr bool per_key = part == AttentionPart::GradK || part == AttentionPart::GradV;
    if (a.batch == 0 || (per_key ? a.kv_len : a.q_len) == 0) return;  // an empty output
    if constexpr (part == AttentionPart::Out) {
      if (decode_chunks(a) > 0) return decode(a, stream, scratch);
      if constexpr (std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
        if (tensor_cores<64>(a, stream) || tensor_cores<128>(a, stream)) return;
    }
    const index_t dim = std::max(a.head_dim, a.v_dim);
    index_t tile = sizeof(C) == 8 ? 16 : 32;
    while (tile > 4 && AttentionTiles<C>::bytes(tile, dim + 1, dim) > kMaxShared) tile /= 2;
    const std::size_t smem = AttentionTiles<C>::bytes(tile, dim + 1, dim);
    if (smem > kMaxShared)
      throw ShapeError("attention: head_dim " + std::to_string(a.head_dim) + " (value head_dim " + std::to_string(a.v_dim) +
                       ") needs more shared memory than a CUDA block has; head_dim up to 256 is supported on CUDA");
    constexpr auto kernel = &attention_kernel<T, Part, Causal, NL, I>;
    allow_dynamic_smem<kernel>(smem);
    const index_t tiles = per_key ? (a.kv_len + tile - 1) / tile : (a.q_len + tile - 1) / tile;
    const index_t blocks = a.batch * (per_key ? a.kv_heads : a.heads) * tiles;
    launch_after_previous<kernel>(dim3(static_cast<unsigned>(blocks)), dim3(kAttentionThreads), smem, stream, a, tile);
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
