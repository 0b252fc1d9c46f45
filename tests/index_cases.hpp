// embedding and scatter_add_rows (the index-rows kernel kind) against a float64 reference:
// i32 and i64 ids of several ranks, tables read through strides, repeated ids, a 16-bit table,
// ids outside the table, determinism (bit-equal runs, and the GPU equal to the CPU bit for bit),
// and gradients by finite differences. Registered by ops_index.cpp with DEVICE_CASE: on the
// CPU, and on the GPU with the inputs on the device (on_device.hpp).
#pragma once
#include <cmath>
#include <cstring>

#include "gradcheck.hpp"

namespace index_cases {

template <class I = kiln::i64>
kiln::Tensor<I> ids(std::int64_t rows, const kiln::Shape& shape, std::uint64_t seed) {
  return kiln::randint<I>(0, rows, shape, seed).to(cases::device());
}

// out[p, :] = table[ids[p], :]
template <class I>
ref::Array gather(const kiln::Tensor<I>& ids, const ref::Array& table) {
  const std::size_t d = table.shape[1];
  std::vector<std::size_t> s(ids.shape().begin(), ids.shape().end());
  s.push_back(d);
  ref::Array out = ref::zeros(s);
  for (std::size_t p = 0; p < ids.numel(); ++p)
    for (std::size_t j = 0; j < d; ++j) out.data[p * d + j] = table.data[static_cast<std::size_t>(ids[p]) * d + j];
  return out;
}
// out[v, :] = the sum of src[p, :] over ids[p] = v
template <class I>
ref::Array scatter(const kiln::Tensor<I>& ids, const ref::Array& src, std::size_t rows) {
  const std::size_t d = src.shape.back();
  ref::Array out = ref::zeros({rows, d});
  for (std::size_t p = 0; p < ids.numel(); ++p)
    for (std::size_t j = 0; j < d; ++j) out.data[static_cast<std::size_t>(ids[p]) * d + j] += src.data[p * d + j];
  return out;
}

inline void embedding_gathers_rows() {
  constexpr auto i64 = kiln::input<"ids", 2, kiln::i64>();
  constexpr auto i32 = kiln::input<"ids", 1, kiln::i32>();
  constexpr auto table = kiln::input<"table", 2>();
  auto f = kiln::compile(kiln::embedding(i64, table));
  auto g = kiln::compile(kiln::embedding(i32, table) * 2 + 1);  // a pointwise consumer after the gather
  CHECK(f.kernel_count() == 1);
  CHECK(f.explain().find("gather rows") != std::string::npos);
  const auto tt = cases::randn({17, 9}, 401);
  const auto rt = ref::from(tt.cpu());
  const auto a = ids(17, {3, 5}, 402);
  ref::check_close(f(i64 = a, table = tt).cpu(), gather(a.cpu(), rt), 0, 0);
  const auto b = ids<kiln::i32>(17, {40}, 403);
  ref::check_close(g(i32 = b, table = tt).cpu(), ref::map(gather(b.cpu(), rt), [](double v) { return 2 * v + 1; }));
  // No ids: an empty result of the right shape.
  const auto none = ids(17, {0, 5}, 404);
  CHECK(f(i64 = none, table = tt).shape() == kiln::Shape{0, 5, 9});
}

inline void embedding_reads_a_strided_table() {
  constexpr auto x = kiln::input<"ids", 1, kiln::i64>();
  constexpr auto w = kiln::input<"w", 2>();
  auto f = kiln::compile(kiln::embedding(x, kiln::transpose(w)));  // rows of w^T: columns of w
  CHECK(f.kernel_count() == 1);
  const auto wt = cases::randn({6, 11}, 405);
  const auto a = ids(11, {23}, 406);
  ref::check_close(f(x = a, w = wt).cpu(), gather(a.cpu(), ref::transpose(ref::from(wt.cpu()))), 0, 0);
}

inline void scatter_add_rows_sums_repeated_ids() {
  constexpr auto x = kiln::input<"ids", 2, kiln::i64>();
  constexpr auto src = kiln::input<"src", 3, double>();
  constexpr auto like = kiln::input<"like", 2, double>();
  auto f = kiln::compile(kiln::scatter_add_rows(x, src, like));
  CHECK(f.explain().find("scatter-add rows") != std::string::npos);
  // 7 rows, ids drawn from the first 5: rows 5 and 6 stay 0, the others are hit many times.
  const auto a = ids(5, {6, 50}, 407);
  const auto st = cases::randn<double>({6, 50, 13}, 408);
  const auto lt = cases::randn<double>({7, 13}, 409);
  const auto got = f(x = a, src = st, like = lt).cpu();
  ref::check_close(got, scatter(a.cpu(), ref::from(st.cpu()), 7), 1e-12, 1e-12);
  // A src read through strides (a transposed view).
  constexpr auto x1 = kiln::input<"ids1", 1, kiln::i64>();
  constexpr auto s2 = kiln::input<"s2", 2, double>();
  auto h = kiln::compile(kiln::scatter_add_rows(x1, kiln::transpose(s2), like));
  const auto b = ids(7, {29}, 410);
  const auto s2t = cases::randn<double>({13, 29}, 411);
  ref::check_close(h(x1 = b, s2 = s2t, like = lt).cpu(),
                   scatter(b.cpu(), ref::transpose(ref::from(s2t.cpu())), 7), 1e-12, 1e-12);
}

// Each output row is summed in increasing position on both devices: two runs agree bit for bit,
// and so do the GPU and the CPU (the same f32 additions in the same order). On the GPU: a table
// of a few rows per SM, a block per row summing it in registers (300 rows, 3 of them hit about
// 1300 times each); a table of several rows per block (2000 rows); and rows too long for the
// registers (3 rows of 1500).
inline void scatter_add_rows_is_deterministic() {
  constexpr auto x = kiln::input<"ids", 1, kiln::i32>();
  constexpr auto src = kiln::input<"src", 2>();
  constexpr auto like = kiln::input<"like", 2>();
  auto f = kiln::compile(kiln::scatter_add_rows(x, src, like));
  const auto check = [&](std::size_t used, std::size_t rows, std::size_t n, std::size_t len, std::uint64_t seed) {
    INFO(n << " ids into the first " << used << " of " << rows << " rows of " << len);
    const auto a = ids<kiln::i32>(used, {n}, seed);
    const auto st = cases::randn({n, len}, seed + 1);
    const auto lt = cases::randn({rows, len}, seed + 2);
    const auto first = f(x = a, src = st, like = lt).cpu(), second = f(x = a, src = st, like = lt).cpu();
    CHECK(std::memcmp(first.data(), second.data(), first.numel() * sizeof(float)) == 0);
    const auto host = f(x = a.cpu(), src = st.cpu(), like = lt.cpu());
    CHECK(std::memcmp(first.data(), host.data(), first.numel() * sizeof(float)) == 0);
    ref::check_close(first, scatter(a.cpu(), ref::from(st.cpu()), rows), 1e-4, 1e-5);
  };
  check(3, 300, 4000, 96, 412);
  check(2000, 2000, 6000, 40, 418);
  check(3, 3, 500, 1500, 421);
}

inline void a_16_bit_table() {
  constexpr auto x = kiln::input<"ids", 1, kiln::i64>();
  constexpr auto t = kiln::input<"t", 2, kiln::bf16>();
  constexpr auto s = kiln::input<"s", 2, kiln::bf16>();
  auto f = kiln::compile(kiln::embedding(x, t));
  auto g = kiln::compile(kiln::scatter_add_rows(x, s, t));
  const auto tt = cases::randn({10, 24}, 415).as<kiln::bf16>();
  const auto a = ids(10, {300}, 416);
  ref::check_close(f(x = a, t = tt).cpu(), gather(a.cpu(), ref::from(tt.cpu())), 0, 0);
  // 30 rows a row on average, summed in float and rounded once.
  const auto st = cases::randn({300, 24}, 417).as<kiln::bf16>();
  ref::check_close(g(x = a, s = st, t = tt).cpu(), scatter(a.cpu(), ref::from(st.cpu()), 10), 2e-2, 8e-3);
}

// On the CPU an IndexError before any kernel runs; on CUDA the ids are not read on the host,
// and a row with an id outside the table is NaN.
inline void ids_outside_the_table() {
  constexpr auto x = kiln::input<"ids", 1, kiln::i64>();
  constexpr auto t = kiln::input<"t", 2>();
  auto f = kiln::compile(kiln::embedding(x, t));
  const auto tt = cases::randn({4, 3}, 418);
  for (const std::int64_t bad : {4, -1}) {
    const auto a = kiln::from_vector<kiln::i64>({0, bad, 2}).to(cases::device());
    if (cases::device().is_cpu()) {
      const std::string want = "embedding: id " + std::to_string(bad) + " at position 1";
      CHECK_THROWS_WITH_AS(f(x = a, t = tt), doctest::Contains(want.c_str()), kiln::IndexError);
    } else {
      const auto got = f(x = a, t = tt).cpu();
      CHECK(got[0] == tt.cpu()[0]);
      CHECK(std::isnan(got[3]));
      CHECK(std::isnan(got[5]));
    }
  }
  constexpr auto s = kiln::input<"s", 2>();
  auto g = kiln::compile(kiln::scatter_add_rows(x, s, t));
  const auto a = ids(4, {5}, 419);
  CHECK_THROWS_WITH_AS(g(x = a, s = cases::randn({5, 2}, 420), t = tt),
                       doctest::Contains("scatter_add_rows: src [5, 2] must be ids' shape [5] followed by"), kiln::ShapeError);
}

// The table's gradient through embedding, and src's through scatter_add_rows, against central
// differences (the loss weights each output element with its own random r).
inline void gradients() {
  constexpr auto x = kiln::input<"ids", 2, kiln::i64>();
  constexpr auto t = kiln::input<"t", 2, double>();
  constexpr auto r = kiln::input<"r", 3, double>();
  constexpr auto loss = kiln::sum(kiln::tanh(kiln::embedding(x, t)) * r);
  const auto a = kiln::randint(0, 6, {3, 4}, 421);
  const auto tt = kiln::rand<double>({6, 5}, 422, -1.0, 1.0), rt = kiln::randn<double>({3, 4, 5}, 423);
  auto value = kiln::compile(loss);
  auto [gt] = kiln::grad(loss, t);
  const auto dev = cases::device();
  gradcheck::check("embedding", kiln::compile(gt)(x = a.to(dev), t = tt.to(dev), r = rt.to(dev)).cpu(),
                   gradcheck::numeric_gradient(tt, [&](const auto& v) { return value(x = a, t = v, r = rt)[0]; }));

  constexpr auto s = kiln::input<"s", 3, double>();
  constexpr auto q = kiln::input<"q", 2, double>();
  constexpr auto loss2 = kiln::sum(kiln::square(kiln::scatter_add_rows(x, kiln::exp(s), t)) * q);
  const auto st = kiln::rand<double>({3, 4, 5}, 424, -1.0, 1.0), qt = kiln::randn<double>({6, 5}, 425);
  auto value2 = kiln::compile(loss2);
  auto [gs] = kiln::grad(loss2, s);
  gradcheck::check("scatter_add_rows", kiln::compile(gs)(x = a.to(dev), s = st.to(dev), t = tt.to(dev), q = qt.to(dev)).cpu(),
                   gradcheck::numeric_gradient(st, [&](const auto& v) { return value2(x = a, s = v, t = tt, q = qt)[0]; }));
}

}  // namespace index_cases
