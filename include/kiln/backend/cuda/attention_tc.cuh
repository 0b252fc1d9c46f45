// kiln: attention's forward on tensor cores (mma.sync, sm_80 on) for bf16 and f16 with head_dim
// D = Dv of 64 or 128, FlashAttention-2's loop: a block of 4 warps owns 64 queries of one head,
// each warp 16 of them, and walks the keys in tiles of 64:
//   - k and v tiles stream into shared memory by cp.async, two stages deep, so tile t + 1 loads
//     while tile t is multiplied; q's tile is loaded once and kept in registers as mma fragments;
//   - s = q k^T: 16 x 64 per warp, (D / 16) x 8 mma of 16 x 8 x 16, k's fragments by ldmatrix
//     (k stored [key][d] is the column-major B operand as it is);
//   - the online softmax in registers: a thread holds two rows' 16 scores; row maxima and sums
//     combine over the 4 threads of a quad (shuffles); the output's accumulators are rescaled;
//   - o += p v: p's accumulators become the A fragments of the second product as they are
//     (rounded to the input type), v's fragments by ldmatrix.trans.
// Rows are padded by 16 bytes, so the 8 rows an ldmatrix reads fall in 8 different bank groups.
// The mask: key j is seen by query i of batch b when first_key(b) <= j < keys_seen(b, i), which
// is at most the batch's length (the last tile's rows past the cache are zero-filled and
// masked). Only key tiles some query of the block sees are read.
#pragma once
#include <cstdint>

#include "kiln/backend/cuda/tc_gemm_mma.cuh"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

inline constexpr int kAttnTcRows = 64, kAttnTcKeys = 64, kAttnTcThreads = 128;

template <int D>
inline constexpr std::size_t attention_tc_smem = static_cast<std::size_t>(kAttnTcRows + 4 * kAttnTcKeys) * (D + 8) * 2;

// Two floats as the 16-bit pair of one mma register (the first in the low half).
template <class S>
__device__ __forceinline__ std::uint32_t pack_pair(float lo, float hi) {
  return static_cast<std::uint32_t>(narrow<S>(lo).bits) | (static_cast<std::uint32_t>(narrow<S>(hi).bits) << 16);
}

template <class S, int D, bool Causal, int NL, class I>
__global__ void __launch_bounds__(kAttnTcThreads) attention_tc_kernel(const lower::AttentionArgs<S, NL, I> a) {
  await_previous_kernel();
#if __CUDA_ARCH__ >= 800
  constexpr int Ld = D + 8;          // row stride in shared memory, elements
  constexpr int Chunks = D / 8;      // 16-byte chunks a row
  constexpr int KSteps = D / 16;     // k-steps of q k^T
  constexpr int NTiles = D / 8;      // 8-wide column tiles of the output
  extern __shared__ __align__(128) unsigned char attention_tc_smem_raw[];
  auto* smem = reinterpret_cast<S*>(attention_tc_smem_raw);
  S* q_s = smem;                                  // 64 x Ld
  S* kv_s = q_s + kAttnTcRows * Ld;               // stage st: k at kv_s + st * 2 * 64 * Ld, v after it
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;

  const index_t tiles = (a.q_len + kAttnTcRows - 1) / kAttnTcRows;
  const index_t bh = blockIdx.x / tiles;
  const index_t qt = tiles - 1 - static_cast<index_t>(blockIdx.x) % tiles;  // the longest (causal) tiles first
  const index_t b = bh / a.heads, h = bh % a.heads, hk = h / (a.heads / a.kv_heads);
  const index_t q0 = qt * kAttnTcRows;
  const index_t last = (q0 + kAttnTcRows < a.q_len ? q0 + kAttnTcRows : a.q_len) - 1;
  const index_t kend = a.keys_seen(b, last, Causal), kfirst = a.first_key(b);
  const int ktiles = static_cast<int>((kend + kAttnTcKeys - 1) / kAttnTcKeys);
  const int kt0 = kfirst < kend ? static_cast<int>(kfirst / kAttnTcKeys) : ktiles;  // the first tile seen

  // Rows [r0, r0 + 64) of an operand (rows row_stride apart from base) into tile dst, zeros
  // from row `rows` on.
  auto fill = [&](S* dst, const S* base, index_t row_stride, index_t r0, index_t rows) {
    for (int c = tid; c < kAttnTcRows * Chunks; c += kAttnTcThreads) {
      const int r = c / Chunks, ch = c % Chunks;
      const bool in = r0 + r < rows;
      const S* src = base + (in ? (r0 + r) * row_stride : 0) + ch * 8;
      tc::copy16(tc::smem_address(dst + r * Ld + ch * 8), src, in ? 16 : 0);
    }
  };
  const S* qb = a.template at<0>(b, h, 0);
  const S* kb = a.template at<1>(b, hk, 0);
  const S* vb = a.template at<2>(b, hk, 0);
  const index_t qs = a.outer[0][2], ks = a.outer[1][2], vs = a.outer[2][2];
  auto fill_kv = [&](int kt) {
    S* k_s = kv_s + (kt & 1) * 2 * kAttnTcKeys * Ld;
    fill(k_s, kb, ks, static_cast<index_t>(kt) * kAttnTcKeys, a.kv_len);
    fill(k_s + kAttnTcKeys * Ld, vb, vs, static_cast<index_t>(kt) * kAttnTcKeys, a.kv_len);
  };
  fill(q_s, qb, qs, q0, a.q_len);
  if (kt0 < ktiles) fill_kv(kt0);
  tc::commit();

  float o[NTiles][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // rows g and g + 8 of the warp
  std::uint32_t qf[KSteps][4];
  const index_t row0 = q0 + warp * 16 + g;  // this thread's two query rows: row0, row0 + 8
  const index_t seen0 = a.keys_seen(b, row0, Causal), seen1 = a.keys_seen(b, row0 + 8, Causal);
  const float scale = a.scale;

  for (int kt = kt0; kt < ktiles; ++kt) {
    if (kt + 1 < ktiles) fill_kv(kt + 1);
    tc::commit();
    tc::wait_pending<1>();
    __syncthreads();
    if (kt == kt0)
#pragma unroll
      for (int kk = 0; kk < KSteps; ++kk)
        tc::ldmatrix4(qf[kk], tc::smem_address(q_s + (warp * 16 + (lane & 15)) * Ld + kk * 16 + (lane >> 4) * 8));
    const S* k_s = kv_s + (kt & 1) * 2 * kAttnTcKeys * Ld;
    const S* v_s = k_s + kAttnTcKeys * Ld;

    // s = q k^T for this warp's 16 rows and the tile's 64 keys: 8 column tiles of 8 keys.
    float s[8][4] = {};
#pragma unroll
    for (int kk = 0; kk < KSteps; ++kk)
#pragma unroll
      for (int np = 0; np < 4; ++np) {  // two column tiles per ldmatrix.x4
        std::uint32_t kf[4];
        const int key = np * 16 + (lane & 7) + ((lane >> 4) << 3), col = kk * 16 + ((lane >> 3) & 1) * 8;
        tc::ldmatrix4(kf, tc::smem_address(k_s + key * Ld + col));
        tc::mma<S>(s[2 * np], qf[kk], kf[0], kf[1]);
        tc::mma<S>(s[2 * np + 1], qf[kk], kf[2], kf[3]);
      }

    // Scale and mask, then the online softmax over the two rows.
    const index_t j0 = static_cast<index_t>(kt) * kAttnTcKeys;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const index_t j = j0 + n * 8 + 2 * t + (e & 1);
        const bool visible = j >= kfirst && j < ((e < 2) ? seen0 : seen1);
        s[n][e] = visible ? s[n][e] * scale : -INFINITY;
        mx[e >> 1] = fmaxf(mx[e >> 1], s[n][e]);
      }
    float corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float use = mx[r] == -INFINITY ? 0.f : mx[r];  // a row that sees no key yet: p = 0
      corr[r] = __expf(m[r] - use);
      m[r] = mx[r];
      l[r] *= corr[r];
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& p = s[n][2 * r + e];
          p = __expf(p - use);
          l[r] += p;
        }
    }
#pragma unroll
    for (int n = 0; n < NTiles; ++n) {
      o[n][0] *= corr[0], o[n][1] *= corr[0];
      o[n][2] *= corr[1], o[n][3] *= corr[1];
    }

    // o += p v: p's accumulators are the A fragments of 4 k-steps of 16 keys.
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const std::uint32_t pf[4] = {pack_pair<S>(s[2 * kk][0], s[2 * kk][1]), pack_pair<S>(s[2 * kk][2], s[2 * kk][3]),
                                   pack_pair<S>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack_pair<S>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int np = 0; np < NTiles / 2; ++np) {  // two output column tiles per ldmatrix.x4.trans
        std::uint32_t vf[4];
        const int key = kk * 16 + (lane & 15), col = np * 16 + (lane >> 4) * 8;
        tc::ldmatrix4_trans(vf, tc::smem_address(v_s + key * Ld + col));
        tc::mma<S>(o[2 * np], pf, vf[0], vf[1]);
        tc::mma<S>(o[2 * np + 1], pf, vf[2], vf[3]);
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  tc::wait_pending<0>();  // nothing in flight at exit (a block whose queries see no key loaded q alone)

  // The sums over each row's quad, then out = o / l (0 for a row that saw no key).
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const index_t row = row0 + 8 * r;
    if (row >= a.q_len) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    S* out = a.out + ((b * a.heads + h) * a.q_len + row) * D;
#pragma unroll
    for (int n = 0; n < NTiles; ++n)
      *reinterpret_cast<std::uint32_t*>(out + n * 8 + 2 * t) = pack_pair<S>(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
  }
#endif
}

}  // namespace kiln::cuda
