// attention (the attention kernel kind) against a naive float64 softmax(q k^T scale) v: with
// and without the causal mask, grouped-query heads, a value head_dim other than q's, lengths
// that are not multiples of the kernels' tiles, decode (one query against a cache), more
// queries than keys, a given scale, operands read through strides, head_dim 64, 128 and 256 in
// f32 and bf16, 4096 positions, bad shapes, and gradients by central differences. Registered by
// ops_attention.cpp with DEVICE_CASE: on the CPU, and on the GPU with the inputs on the device.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gradcheck.hpp"

namespace attention_cases {

// out[b, h, i, :] = sum_j softmax_j(scale q_i . k_j) v_j over the keys j <= i + Skv - Sq (all of
// them without the mask), key/value head h / (H / Hkv); a query that sees no key gives zeros.
inline ref::Array reference(const ref::Array& q, const ref::Array& k, const ref::Array& v, bool causal, double scale = 0) {
  const std::size_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3];
  const std::size_t Hkv = k.shape[1], Skv = k.shape[2], Dv = v.shape[3];
  if (scale == 0) scale = 1 / std::sqrt(static_cast<double>(D));
  ref::Array out = ref::zeros({B, H, Sq, Dv});
  std::vector<double> s(Skv);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h) {
      const std::size_t hk = h / (H / Hkv);
      for (std::size_t i = 0; i < Sq; ++i) {
        const long seen = causal ? std::min<long>(static_cast<long>(Skv), static_cast<long>(i + 1 + Skv) - static_cast<long>(Sq))
                                 : static_cast<long>(Skv);
        if (seen <= 0) continue;
        double mx = -std::numeric_limits<double>::infinity();
        for (long j = 0; j < seen; ++j) {
          double dot = 0;
          for (std::size_t d = 0; d < D; ++d)
            dot += q.data[((b * H + h) * Sq + i) * D + d] * k.data[((b * Hkv + hk) * Skv + j) * D + d];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (long j = 0; j < seen; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (long j = 0; j < seen; ++j)
          for (std::size_t d = 0; d < Dv; ++d)
            out.data[((b * H + h) * Sq + i) * Dv + d] += s[j] / sum * v.data[((b * Hkv + hk) * Skv + j) * Dv + d];
      }
    }
  return out;
}

template <class T>
struct Qkv {
  kiln::Tensor<T> q, k, v;
};
template <class T>
Qkv<T> draw(const kiln::Shape& q, const kiln::Shape& kv, std::size_t dv, std::uint64_t seed) {
  const kiln::Shape vs{kv[0], kv[1], kv[2], dv};
  return {cases::randn<float>(q, seed).template as<T>(), cases::randn<float>(kv, seed + 1).template as<T>(),
          cases::randn<float>(vs, seed + 2).template as<T>()};
}
template <class T>
ref::Array want(const Qkv<T>& t, bool causal, double scale = 0) {
  return reference(ref::from(t.q.cpu()), ref::from(t.k.cpu()), ref::from(t.v.cpu()), causal, scale);
}

constexpr auto q64 = kiln::input<"q", 4, double>();
constexpr auto k64 = kiln::input<"k", 4, double>();
constexpr auto v64 = kiln::input<"v", 4, double>();

// Shapes around the tiles (64): one tile, several with a ragged end, grouped-query heads, a
// value head_dim other than q's, decode and a longer cache than queries, with and without the
// mask, in float64.
inline void values() {
  auto plain = kiln::compile(kiln::attention(q64, k64, v64));
  auto masked = kiln::compile(kiln::attention<kiln::causal>(q64, k64, v64));
  CHECK(plain.kernel_count() == 1);
  CHECK(plain.explain().find("attention") != std::string::npos);
  struct Case {
    kiln::Shape q, kv;
    std::size_t dv;
  };
  const Case shapes[] = {
      {{1, 1, 5, 8}, {1, 1, 5, 8}, 8},        {{2, 3, 67, 16}, {2, 3, 67, 16}, 16},  // ragged second tile
      {{1, 4, 130, 8}, {1, 2, 130, 8}, 8},    // two query heads per key/value head
      {{2, 6, 33, 16}, {2, 2, 33, 16}, 12},   // three per head, and Dv != D
      {{3, 4, 1, 32}, {3, 1, 150, 32}, 32},   // decode: one query against 150 cached positions
      {{1, 2, 40, 8}, {1, 2, 100, 8}, 8},     // 40 new queries after 60 cached positions
      // Long caches (CUDA splits them into chunks of 256 keys, combined after): 3 new queries
      // of 2 heads per key/value head, and one query of head_dim 64 against 700 positions.
      {{2, 4, 3, 16}, {2, 2, 1000, 16}, 16},  {{1, 2, 1, 64}, {1, 2, 700, 64}, 64},
  };
  std::uint64_t seed = 600;
  for (const auto& c : shapes) {
    const auto t = draw<double>(c.q, c.kv, c.dv, seed += 3);
    ref::check_close(plain(q64 = t.q, k64 = t.k, v64 = t.v).cpu(), want(t, false), 1e-12, 1e-12);
    ref::check_close(masked(q64 = t.q, k64 = t.k, v64 = t.v).cpu(), want(t, true), 1e-12, 1e-12);
  }
}

// More queries than keys under the mask: the first Sq - Skv queries see nothing and get zeros.
// A given scale. Operands read through strides: q as the [B, S, H, D] projection transposed.
inline void masks_scales_and_strides() {
  auto masked = kiln::compile(kiln::attention<kiln::causal>(q64, k64, v64));
  const auto t = draw<double>({1, 2, 30, 8}, {1, 2, 20, 8}, 8, 620);
  const auto got = masked(q64 = t.q, k64 = t.k, v64 = t.v).cpu();
  ref::check_close(got, want(t, true), 1e-12, 1e-12);
  CHECK(got[0] == 0.0);
  auto scaled = kiln::compile(kiln::attention<kiln::AttentionMask::None, 0.3>(q64, k64, v64));
  const auto u = draw<double>({2, 2, 19, 8}, {2, 2, 23, 8}, 8, 623);
  ref::check_close(scaled(q64 = u.q, k64 = u.k, v64 = u.v).cpu(), want(u, false, 0.3), 1e-12, 1e-12);

  constexpr auto x = kiln::input<"x", 4, double>();  // [B, S, H, D]
  auto strided = kiln::compile(kiln::attention<kiln::causal>(kiln::transpose<1, 2>(x), k64, v64));
  CHECK(strided.kernel_count() == 1);  // the transposed view is read in place
  const auto xt = cases::randn<double>({2, 45, 3, 16}, 626);
  const auto w = draw<double>({2, 3, 45, 16}, {2, 3, 45, 16}, 16, 627);
  const auto xq = ref::from(kiln::compile(kiln::transpose<1, 2>(x))(x = xt).cpu());
  ref::check_close(strided(x = xt, k64 = w.k, v64 = w.v).cpu(),
                   reference(xq, ref::from(w.k.cpu()), ref::from(w.v.cpu()), true), 1e-12, 1e-12);
}

// head_dim 64, 128 and 256 in f32, bf16 and f16, prefill and decode, and a strided q. The
// reference uses the same 16-bit inputs; the tolerance covers the output's rounding and, on
// CUDA's tensor cores, the probabilities rounded to the input type before p v.
template <class T>
void head_dims(double rtol, double atol) {
  constexpr auto q = kiln::input<"q", 4, T>();
  constexpr auto k = kiln::input<"k", 4, T>();
  constexpr auto v = kiln::input<"v", 4, T>();
  auto f = kiln::compile(kiln::attention<kiln::causal>(q, k, v));
  std::uint64_t seed = 630;
  for (const std::size_t d : {64, 128, 256}) {
    const auto t = draw<T>({2, 4, 77, d}, {2, 2, 77, d}, d, seed += 3);
    ref::check_close(f(q = t.q, k = t.k, v = t.v).cpu(), want(t, true), rtol, atol);
    // Decode: 4 query heads of one key/value head against 600 cached positions.
    const auto u = draw<T>({1, 4, 1, d}, {1, 1, 600, d}, d, seed += 3);
    ref::check_close(f(q = u.q, k = u.k, v = u.v).cpu(), want(u, true), rtol, atol);
  }
  // The causal mask with more keys than queries (bottom-right: every query sees the first 50
  // keys) and with more queries than keys (the first 100 queries see none and give zeros).
  for (const std::size_t d : {64, 128}) {
    const auto more_keys = draw<T>({1, 2, 150, d}, {1, 2, 200, d}, d, seed += 3);
    ref::check_close(f(q = more_keys.q, k = more_keys.k, v = more_keys.v).cpu(), want(more_keys, true), rtol, atol);
    const auto more_queries = draw<T>({1, 2, 200, d}, {1, 2, 100, d}, d, seed += 3);
    ref::check_close(f(q = more_queries.q, k = more_queries.k, v = more_queries.v).cpu(), want(more_queries, true), rtol,
                     atol);
  }
  // q as a transposed [B, S, H, D] projection (strided rows), no mask, 130 positions.
  constexpr auto x = kiln::input<"x", 4, T>();
  auto g = kiln::compile(kiln::attention(kiln::transpose<1, 2>(x), k, v));
  const auto xt = cases::randn({2, 130, 4, 64}, 645).template as<T>();
  const auto w = draw<T>({2, 4, 130, 64}, {2, 4, 130, 64}, 64, 646);
  const auto xq = ref::from(kiln::compile(kiln::transpose<1, 2>(x))(x = xt).cpu());
  ref::check_close(g(x = xt, k = w.k, v = w.v).cpu(), reference(xq, ref::from(w.k.cpu()), ref::from(w.v.cpu()), false), rtol,
                   atol);
}

// 4096 positions, causal, in f32: the online softmax over 64 key tiles.
inline void long_sequence() {
  constexpr auto q = kiln::input<"q", 4>();
  constexpr auto k = kiln::input<"k", 4>();
  constexpr auto v = kiln::input<"v", 4>();
  auto f = kiln::compile(kiln::attention<kiln::causal>(q, k, v));
  const auto t = draw<float>({1, 1, 4096, 64}, {1, 1, 4096, 64}, 64, 640);
  ref::check_close(f(q = t.q, k = t.k, v = t.v).cpu(), want(t, true), 1e-4, 1e-5);
}

inline void bad_shapes() {
  auto f = kiln::compile(kiln::attention(q64, k64, v64));
  const auto q = cases::randn<double>({1, 4, 5, 8}, 650);
  auto call = [&](const kiln::Shape& ks, const kiln::Shape& vs) {
    return f(q64 = q, k64 = cases::randn<double>(ks, 651), v64 = cases::randn<double>(vs, 652));
  };
  CHECK_THROWS_WITH_AS(call({1, 3, 5, 8}, {1, 3, 5, 8}), doctest::Contains("attention: q's heads must be a positive multiple of k's"),
                       kiln::ShapeError);
  CHECK_THROWS_WITH_AS(call({1, 4, 5, 6}, {1, 4, 5, 8}), doctest::Contains("attention: q and k must have one head_dim (q [1, 4, 5, 8], k [1, 4, 5, 6]"),
                       kiln::ShapeError);
  CHECK_THROWS_WITH_AS(call({1, 4, 5, 8}, {1, 4, 6, 8}), doctest::Contains("k and v must have one shape"), kiln::ShapeError);
  CHECK_THROWS_WITH_AS(call({2, 4, 5, 8}, {2, 4, 5, 8}), doctest::Contains("one batch size"), kiln::ShapeError);
  CHECK_THROWS_WITH_AS(f(q64 = cases::randn<double>({1, 0, 5, 8}, 653), k64 = cases::randn<double>({1, 2, 5, 8}, 654),
                         v64 = cases::randn<double>({1, 2, 5, 8}, 655)),
                       doctest::Contains("positive multiple"), kiln::ShapeError);
}

// Batch b of x [B, H, S, D] with its positions cut to [0, len): [1, H, len, D].
inline ref::Array cut(const ref::Array& x, std::size_t b, std::size_t len) {
  const std::size_t H = x.shape[1], S = x.shape[2], D = x.shape[3];
  ref::Array out = ref::zeros({1, H, len, D});
  for (std::size_t h = 0; h < H; ++h)
    for (std::size_t i = 0; i < len; ++i)
      for (std::size_t d = 0; d < D; ++d) out.data[(h * len + i) * D + d] = x.data[((b * H + h) * S + i) * D + d];
  return out;
}
// The reference with batch b using keys [0, lens[b]) only.
inline ref::Array reference_cut(const ref::Array& q, const ref::Array& k, const ref::Array& v, const std::vector<std::int64_t>& lens,
                                bool causal) {
  const std::size_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], Dv = v.shape[3];
  ref::Array out = ref::zeros({B, H, Sq, Dv});
  for (std::size_t b = 0; b < B; ++b) {
    const auto L = static_cast<std::size_t>(lens[b]);
    const ref::Array o = reference(cut(q, b, Sq), cut(k, b, L), cut(v, b, L), causal);
    std::copy(o.data.begin(), o.data.end(), out.data.begin() + static_cast<std::ptrdiff_t>(b * H * Sq * Dv));
  }
  return out;
}

// kv_len, read when the program runs: batch b uses the first kv_len[b] positions of a static
// cache (and under the mask its queries are the last of those), one compiled program for every
// length: a [B] i64 length through the decode path (CUDA) and the general one, a scalar i32
// through the tensor cores (bf16), lengths past the cache, and a wrong shape.
inline void cache_lengths() {
  constexpr auto len = kiln::input<"len", 1, kiln::i64>();
  auto f = kiln::compile(kiln::attention<kiln::causal>(q64, k64, v64, len));
  auto g = kiln::compile(kiln::attention(q64, k64, v64, len));
  const auto lengths = [](std::vector<std::int64_t> l) { return kiln::from_vector<kiln::i64>(l).to(cases::device()); };
  const auto t = draw<double>({2, 4, 3, 16}, {2, 2, 300, 16}, 16, 710);  // 6 query rows per head: decode on CUDA
  const auto u = draw<double>({2, 2, 70, 16}, {2, 2, 300, 16}, 16, 713);
  for (const std::vector<std::int64_t>& l : {std::vector<std::int64_t>{20, 300}, {257, 3}, {0, 100}}) {
    const auto q = ref::from(t.q.cpu()), k = ref::from(t.k.cpu()), v = ref::from(t.v.cpu());
    ref::check_close(f(q64 = t.q, k64 = t.k, v64 = t.v, len = lengths(l)).cpu(), reference_cut(q, k, v, l, true), 1e-12, 1e-12);
    ref::check_close(g(q64 = u.q, k64 = u.k, v64 = u.v, len = lengths(l)).cpu(),
                     reference_cut(ref::from(u.q.cpu()), ref::from(u.k.cpu()), ref::from(u.v.cpu()), l, false), 1e-12, 1e-12);
  }
  using kiln::bf16;
  constexpr auto qb = kiln::input<"q", 4, bf16>();
  constexpr auto kb = kiln::input<"k", 4, bf16>();
  constexpr auto vb = kiln::input<"v", 4, bf16>();
  constexpr auto n = kiln::input<"n", 0, kiln::i32>();
  auto h = kiln::compile(kiln::attention<kiln::causal>(qb, kb, vb, n));
  const auto w = draw<bf16>({2, 2, 70, 64}, {2, 2, 200, 64}, 64, 716);
  const auto nt = kiln::from_vector<kiln::i32>({130}, kiln::Shape{}).to(cases::device());
  ref::check_close(h(qb = w.q, kb = w.k, vb = w.v, n = nt).cpu(),
                   reference_cut(ref::from(w.q.cpu()), ref::from(w.k.cpu()), ref::from(w.v.cpu()), {130, 130}, true), 2e-2, 8e-3);
  if (cases::device().is_cpu()) {
    CHECK_THROWS_WITH_AS(f(q64 = t.q, k64 = t.k, v64 = t.v, len = lengths({5, 301})),
                         doctest::Contains("attention: kv_len 301 of batch 1 is not a length of the cache, which has 300"),
                         kiln::IndexError);
  } else {  // clamped to the cache
    const std::vector<std::int64_t> l{5, 300};
    ref::check_close(f(q64 = t.q, k64 = t.k, v64 = t.v, len = lengths({5, 301})).cpu(),
                     reference_cut(ref::from(t.q.cpu()), ref::from(t.k.cpu()), ref::from(t.v.cpu()), l, true), 1e-12, 1e-12);
  }
  CHECK_THROWS_WITH_AS(f(q64 = t.q, k64 = t.k, v64 = t.v, len = lengths({5, 6, 7})),
                       doctest::Contains("kv_len [3] must be a scalar, one length per batch [2], or one key window"),
                       kiln::ShapeError);
}

// The reference with batch b using keys [first[b], end[b]) only: under the mask, query i sees
// those up to position i + end[b] - Sq.
inline ref::Array reference_window(const ref::Array& q, const ref::Array& k, const ref::Array& v,
                                   const std::vector<std::int64_t>& first, const std::vector<std::int64_t>& end, bool causal) {
  const std::size_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3];
  const std::size_t Hkv = k.shape[1], Skv = k.shape[2], Dv = v.shape[3];
  const double scale = 1 / std::sqrt(static_cast<double>(D));
  ref::Array out = ref::zeros({B, H, Sq, Dv});
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t i = 0; i < Sq; ++i) {
        const long stop = causal ? std::min<long>(end[b], static_cast<long>(i + 1) + end[b] - static_cast<long>(Sq)) : end[b];
        std::vector<double> s(Skv);
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        for (long j = first[b]; j < stop; ++j) {
          double dot = 0;
          for (std::size_t d = 0; d < D; ++d)
            dot += q.data[((b * H + h) * Sq + i) * D + d] * k.data[((b * Hkv + h / (H / Hkv)) * Skv + j) * D + d];
          mx = std::max(mx, s[j] = dot * scale);
        }
        for (long j = first[b]; j < stop; ++j) sum += s[j] = std::exp(s[j] - mx);
        for (long j = first[b]; j < stop; ++j)
          for (std::size_t d = 0; d < Dv; ++d)
            out.data[((b * H + h) * Sq + i) * Dv + d] += s[j] / sum * v.data[((b * Hkv + h / (H / Hkv)) * Skv + j) * Dv + d];
      }
  return out;
}

// Key windows [B, 2] (first key, end), as a left-padded batch in a static cache uses them: the
// decode path, the general kernel and the tensor cores (bf16, a window starting past the first
// key tile), a padded prompt whose first queries see no key (zeros), empty windows, and windows
// that are not windows of the cache.
inline void key_windows() {
  constexpr auto win = kiln::input<"win", 2, kiln::i64>();
  auto f = kiln::compile(kiln::attention<kiln::causal>(q64, k64, v64, win));
  auto g = kiln::compile(kiln::attention(q64, k64, v64, win));
  const auto windows = [](std::vector<std::int64_t> first, std::vector<std::int64_t> end) {
    std::vector<std::int64_t> w;
    for (std::size_t b = 0; b < first.size(); ++b) w.insert(w.end(), {first[b], end[b]});
    return kiln::from_vector<kiln::i64>(w, kiln::Shape{first.size(), 2}).to(cases::device());
  };
  const auto t = draw<double>({2, 4, 3, 16}, {2, 2, 300, 16}, 16, 730);  // decode on CUDA
  const auto u = draw<double>({2, 2, 70, 16}, {2, 2, 300, 16}, 16, 733);  // the general kernel
  const auto check = [&](auto& fn, const Qkv<double>& x, std::vector<std::int64_t> first, std::vector<std::int64_t> end,
                         bool causal) {
    ref::check_close(fn(q64 = x.q, k64 = x.k, v64 = x.v, win = windows(first, end)).cpu(),
                     reference_window(ref::from(x.q.cpu()), ref::from(x.k.cpu()), ref::from(x.v.cpu()), first, end, causal),
                     1e-12, 1e-12);
  };
  for (const auto& [first, end] : std::vector<std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>>{
           {{5, 100}, {20, 300}}, {{0, 250}, {257, 257}}, {{129, 3}, {300, 70}}}) {
    check(f, t, first, end, true);
    check(g, t, first, end, false);
    check(f, u, first, end, true);
    check(g, u, first, end, false);
  }
  // A left-padded prompt: batch 0 starts at position 7, so its first 7 queries see no key.
  const auto p = draw<double>({2, 2, 20, 16}, {2, 2, 20, 16}, 16, 736);
  check(f, p, {7, 0}, {20, 20}, true);
  const auto out = f(q64 = p.q, k64 = p.k, v64 = p.v, win = windows({7, 0}, {20, 20})).cpu();
  CHECK(out[6 * 16] == 0.0);  // batch 0, head 0, query 6
  using kiln::bf16;
  constexpr auto qb = kiln::input<"q", 4, bf16>();
  constexpr auto kb = kiln::input<"k", 4, bf16>();
  constexpr auto vb = kiln::input<"v", 4, bf16>();
  auto h = kiln::compile(kiln::attention<kiln::causal>(qb, kb, vb, win));
  const auto w = draw<bf16>({2, 2, 70, 64}, {2, 2, 200, 64}, 64, 739);
  const std::vector<std::int64_t> first{70, 3}, end{130, 200};
  ref::check_close(h(qb = w.q, kb = w.k, vb = w.v, win = windows(first, end)).cpu(),
                   reference_window(ref::from(w.q.cpu()), ref::from(w.k.cpu()), ref::from(w.v.cpu()), first, end, true), 2e-2,
                   8e-3);
  if (cases::device().is_cpu()) {
    CHECK_THROWS_WITH_AS(f(q64 = t.q, k64 = t.k, v64 = t.v, win = windows({5, 9}, {20, 8})),
                         doctest::Contains("attention: the key window [9, 8) of batch 1 is not a window of the cache, which "
                                           "has 300 positions"),
                         kiln::IndexError);
    CHECK_THROWS_AS(f(q64 = t.q, k64 = t.k, v64 = t.v, win = windows({-1, 0}, {20, 8})), kiln::IndexError);
    CHECK_THROWS_AS(f(q64 = t.q, k64 = t.k, v64 = t.v, win = windows({0, 0}, {20, 301})), kiln::IndexError);
  }
  CHECK_THROWS_WITH_AS(
      f(q64 = t.q, k64 = t.k, v64 = t.v, win = kiln::zeros<kiln::i64>({2, 3}, cases::device())),
      doctest::Contains("or one key window (first, end) per batch [2, 2]"), kiln::ShapeError);
}

// d/dq, d/dk and d/dv of sum(attention<causal>(q, k, v, n) * r) against central differences,
// for q [2, 2, 3, 4] and k, v [2, 1, 9, 4], n an index operand of rank R (lengths or windows);
// returns dk and dv.
template <int R>
std::pair<kiln::Tensor<double>, kiln::Tensor<double>> gradients_with(const kiln::Tensor<kiln::i64>& n, std::uint64_t seed) {
  constexpr auto len = kiln::input<"len", R, kiln::i64>();
  constexpr auto r = kiln::input<"r", 4, double>();
  constexpr auto loss = kiln::sum(kiln::attention<kiln::causal>(q64, k64, v64, len) * r);
  auto value = kiln::compile(loss);
  auto [gq, gk, gv] = kiln::grad(loss, q64, k64, v64);
  auto grads = kiln::compile(kiln::outputs(gq, gk, gv));
  const auto t = draw<double>({2, 2, 3, 4}, {2, 1, 9, 4}, 4, seed);
  const auto qt = t.q.cpu(), kt = t.k.cpu(), vt = t.v.cpu();
  const auto rt = kiln::randn<double>({2, 2, 3, 4}, seed + 5);
  const auto dev = cases::device();
  const auto [aq, ak, av] = grads(q64 = t.q, k64 = t.k, v64 = t.v, len = n.to(dev), r = rt.to(dev));
  auto at = [&](const kiln::Tensor<double>& a, const kiln::Tensor<double>& b, const kiln::Tensor<double>& c) {
    return value(q64 = a, k64 = b, v64 = c, len = n, r = rt)[0];
  };
  gradcheck::check("attention dq", aq.cpu(), gradcheck::numeric_gradient(qt, [&](const auto& x) { return at(x, kt, vt); }));
  gradcheck::check("attention dk", ak.cpu(), gradcheck::numeric_gradient(kt, [&](const auto& x) { return at(qt, x, vt); }));
  gradcheck::check("attention dv", av.cpu(), gradcheck::numeric_gradient(vt, [&](const auto& x) { return at(qt, kt, x); }));
  return {ak.cpu(), av.cpu()};
}
// With kv_len: the keys past a batch's length get zero gradients.
inline void gradients_with_lengths() {
  const auto [dk, dv] = gradients_with<1>(kiln::from_vector<kiln::i64>({4, 9}), 720);
  CHECK(dk[4 * 4] == 0.0);  // batch 0, position 4: past its length
}
// With key windows: the keys outside a batch's window get zero gradients.
inline void gradients_with_windows() {
  const auto [dk, dv] = gradients_with<2>(kiln::from_vector<kiln::i64>({2, 6, 5, 9}, kiln::Shape{2, 2}), 740);
  CHECK(dk[1 * 4] == 0.0);        // batch 0, position 1: before its window
  CHECK(dv[(9 + 4) * 4] == 0.0);  // batch 1, position 4: before its window
}

// d/dq, d/dk and d/dv of sum(attention(q, k, v) * r) against central differences: causal and
// not, grouped-query heads (dk and dv sum over a group's query heads), Dv != D, and more keys
// than queries.
template <kiln::AttentionMask M>
void gradients_of(const kiln::Shape& qs, const kiln::Shape& kvs, std::size_t dv, std::uint64_t seed) {
  constexpr auto r = kiln::input<"r", 4, double>();
  constexpr auto loss = kiln::sum(kiln::attention<M>(q64, k64, v64) * r);
  auto value = kiln::compile(loss);
  auto [gq, gk, gv] = kiln::grad(loss, q64, k64, v64);
  auto grads = kiln::compile(kiln::outputs(gq, gk, gv));
  const auto t = draw<double>(qs, kvs, dv, seed);
  const auto qt = t.q.cpu(), kt = t.k.cpu(), vt = t.v.cpu();
  const auto rt = kiln::randn<double>({qs[0], qs[1], qs[2], dv}, seed + 5);
  const auto dev = cases::device();
  const auto [aq, ak, av] = grads(q64 = t.q, k64 = t.k, v64 = t.v, r = rt.to(dev));
  auto at = [&](const kiln::Tensor<double>& a, const kiln::Tensor<double>& b, const kiln::Tensor<double>& c) {
    return value(q64 = a, k64 = b, v64 = c, r = rt)[0];
  };
  gradcheck::check("attention dq", aq.cpu(), gradcheck::numeric_gradient(qt, [&](const auto& x) { return at(x, kt, vt); }));
  gradcheck::check("attention dk", ak.cpu(), gradcheck::numeric_gradient(kt, [&](const auto& x) { return at(qt, x, vt); }));
  gradcheck::check("attention dv", av.cpu(), gradcheck::numeric_gradient(vt, [&](const auto& x) { return at(qt, kt, x); }));
}
// In bf16: dq, dk and dv of sum(attention(q, k, v) * r) against the same gradients in float64 (which
// the cases above check by central differences) on the same bf16-rounded values. The backward's
// statistics stay in float, so the error is the 16-bit rounding of the operands and results.
inline void gradients_in_bf16() {
  using kiln::bf16;
  constexpr auto q = kiln::input<"q", 4, bf16>();
  constexpr auto k = kiln::input<"k", 4, bf16>();
  constexpr auto v = kiln::input<"v", 4, bf16>();
  constexpr auto r = kiln::input<"r", 4, bf16>();
  constexpr auto r64 = kiln::input<"r", 4, double>();
  constexpr auto loss = kiln::sum(kiln::attention<kiln::causal>(q, k, v) * r);
  constexpr auto loss64 = kiln::sum(kiln::attention<kiln::causal>(q64, k64, v64) * r64);
  auto [gq, gk, gv] = kiln::grad(loss, q, k, v);
  auto [gq64, gk64, gv64] = kiln::grad(loss64, q64, k64, v64);
  auto grads = kiln::compile(kiln::outputs(gq, gk, gv));
  auto grads64 = kiln::compile(kiln::outputs(gq64, gk64, gv64));
  const auto t = draw<bf16>({2, 4, 90, 64}, {2, 2, 90, 64}, 64, 700);
  const auto rt = cases::randn<float>({2, 4, 90, 64}, 705).as<bf16>();
  const auto [aq, ak, av] = grads(q = t.q, k = t.k, v = t.v, r = rt);
  const auto wide = [](const kiln::Tensor<bf16>& x) { return x.cpu().as<double>(); };
  const auto [wq, wk, wv] = grads64(q64 = wide(t.q), k64 = wide(t.k), v64 = wide(t.v), r64 = wide(rt));
  ref::check_close(aq.cpu(), ref::from(wq), 1e-2, 3e-3);
  ref::check_close(ak.cpu(), ref::from(wk), 1e-2, 3e-3);
  ref::check_close(av.cpu(), ref::from(wv), 1e-2, 3e-3);
}

inline void gradients() {
  gradients_of<kiln::AttentionMask::None>({2, 2, 5, 4}, {2, 2, 5, 4}, 4, 660);
  gradients_of<kiln::AttentionMask::Causal>({1, 4, 7, 3}, {1, 2, 7, 3}, 5, 670);
  gradients_of<kiln::AttentionMask::Causal>({1, 2, 3, 4}, {1, 1, 6, 4}, 4, 680);
  gradients_of<kiln::AttentionMask::Causal>({1, 1, 70, 2}, {1, 1, 70, 2}, 2, 690);  // two tiles each way
  // A head as wide as a model's (the CPU kernel keeps 32 or 32 + 16 columns in registers and
  // skips the pieces of a tile the causal mask hides), two tiles each way, grouped queries.
  gradients_of<kiln::AttentionMask::Causal>({1, 2, 70, 32}, {1, 1, 70, 32}, 48, 710);
}

}  // namespace attention_cases
