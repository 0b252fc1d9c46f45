// permute, transpose and reshape: views read through strides, copies only where a contiguous
// value is needed (a reshape of a transpose, a GEMM operand without a unit stride, an output
// that is a view or an input). Registered by
// ops_layout.cpp with DEVICE_CASE: on the CPU, and on the GPU with the inputs on the device
// (on_device.hpp).
#pragma once
#include "gradcheck.hpp"

namespace layout_cases {

inline void transpose_feeds_pointwise_through_strides() {
  constexpr auto a = kiln::input<"a", 3>();
  constexpr auto b = kiln::input<"b", 3>();
  auto f = kiln::compile(kiln::transpose(a) * 2 + b);
  CHECK(f.kernel_count() == 1);
  const auto at = cases::randn({3, 5, 7}, 71), bt = cases::randn({3, 7, 5}, 72);
  ref::check_close(f(a = at, b = bt).cpu(), ref::zip(ref::transpose(ref::from(at.cpu())), ref::from(bt.cpu()),
                                                     [](double p, double q) { return 2 * p + q; }));
}

inline void transpose_of_computed_value() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::exp(kiln::transpose(a + 1)));
  CHECK(f.kernel_count() == 2);  // a + 1 is materialised, the transpose is read by exp
  const auto at = cases::randn({40, 30}, 73);
  ref::check_close(f(a = at).cpu(), ref::map(ref::transpose(ref::from(at.cpu())), [](double v) { return std::exp(v + 1); }));
}

inline void reshape_with_inferred_extent() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::sum<1>(kiln::reshape(a * 3, {-1, 4})));
  const auto at = cases::randn({6, 8}, 74);
  auto out = f(a = at);
  CHECK(out.shape() == kiln::Shape{12});
  ref::Array r = ref::map(ref::from(at.cpu()), [](double v) { return 3 * v; });
  r.shape = {12, 4};
  ref::check_close(out.cpu(), ref::reduce(r, 1, ref::Red::Sum, false), 1e-5, 1e-5);
}

inline void reshape_of_transpose_copies_first() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::reshape(kiln::transpose(a), {-1}) + 1);
  CHECK(f.kernel_count() == 2);
  const auto at = cases::randn({5, 7}, 75);
  ref::Array r = ref::map(ref::transpose(ref::from(at.cpu())), [](double v) { return v + 1; });
  r.shape = {35};
  ref::check_close(f(a = at).cpu(), r);
}

inline void outputs_that_are_views_or_inputs_are_copied() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile(kiln::outputs(a, kiln::transpose(a), kiln::reshape(a, {2, -1})));
  const auto at = cases::randn({4, 6}, 76);
  auto [same, t, r] = f(a = at);
  const auto host = at.cpu(), rh = r.cpu();
  ref::check_close(same.cpu(), ref::from(host));
  CHECK(same.data() != at.data());  // addresses on device(), compared there
  ref::check_close(t.cpu(), ref::transpose(ref::from(host)));
  CHECK(r.shape() == kiln::Shape{2, 12});
  for (std::size_t i = 0; i < host.numel(); ++i) CHECK(rh[i] == host[i]);
}

// The reference: axis d of the result is axis perm[d] of a.
inline ref::Array permute(const ref::Array& a, const std::vector<int>& perm) {
  std::vector<std::size_t> s(perm.size());
  for (std::size_t d = 0; d < perm.size(); ++d) s[d] = a.shape[perm[d]];
  ref::Array out = ref::zeros(s);
  for (std::size_t i = 0; i < out.numel(); ++i) {
    const auto idx = ref::unravel(i, s);
    std::vector<std::size_t> src(perm.size());
    for (std::size_t d = 0; d < perm.size(); ++d) src[perm[d]] = idx[d];
    out.data[i] = a.data[ref::ravel(src, a.shape)];
  }
  return out;
}

inline void permute_and_transpose_of_any_two_axes() {
  constexpr auto a = kiln::input<"a", 4>();
  static_assert(std::is_same_v<decltype(kiln::permute<0, 1, 2, 3>(a)), std::remove_const_t<decltype(a)>>,
                "the identity permutation is its operand");
  auto f = kiln::compile(kiln::permute<2, 0, 3, 1>(a) + 1);
  auto t = kiln::compile(kiln::transpose<0, -2>(a) * 2);
  CHECK(f.kernel_count() == 1);
  const auto at = cases::randn({2, 3, 5, 4}, 77);
  const auto ra = ref::from(at.cpu());
  ref::check_close(f(a = at).cpu(), ref::map(permute(ra, {2, 0, 3, 1}), [](double v) { return v + 1; }));
  ref::check_close(t(a = at).cpu(), ref::map(permute(ra, {2, 1, 0, 3}), [](double v) { return 2 * v; }));
  CHECK(f.explain().find("permute<2, 0, 3, 1>(a)") != std::string::npos);
}

// [B, S, H, D] -> [B, H, S, D] keeps D's unit stride: the GEMM reads the view. Moving D to the
// front loses it: the view is copied before the GEMM. Either way, the values are the product's.
inline void permuted_gemm_operands() {
  constexpr auto q = kiln::input<"q", 3>();
  constexpr auto k = kiln::input<"k", 3>();
  auto keeps = kiln::compile(kiln::matmul(kiln::permute<1, 0, 2>(q), kiln::transpose(kiln::permute<1, 0, 2>(k))));
  auto loses = kiln::compile(kiln::matmul(kiln::permute<2, 1, 0>(q), kiln::permute<0, 2, 1>(k)));
  CHECK(keeps.kernel_count() == 1);
  CHECK(loses.kernel_count() == 2);
  const auto qt = cases::randn({6, 3, 8}, 78), kt = cases::randn({7, 3, 8}, 79);
  const auto rq = ref::from(qt.cpu()), rk = ref::from(kt.cpu());
  auto batched_matmul = [](const ref::Array& x, const ref::Array& y) {  // [B, M, K] x [B, K, N]
    const std::size_t b = x.shape[0], m = x.shape[1], kk = x.shape[2], n = y.shape[2];
    ref::Array out = ref::zeros({b, m, n});
    for (std::size_t i = 0; i < b; ++i)
      for (std::size_t r = 0; r < m; ++r)
        for (std::size_t c = 0; c < n; ++c)
          for (std::size_t e = 0; e < kk; ++e)
            out.data[(i * m + r) * n + c] += x.data[(i * m + r) * kk + e] * y.data[(i * kk + e) * n + c];
    return out;
  };
  ref::check_close(keeps(q = qt, k = kt).cpu(), batched_matmul(permute(rq, {1, 0, 2}), permute(rk, {1, 2, 0})));
  const auto k2 = cases::randn({8, 5, 6}, 80);  // [8, 3, 6] (q permuted) times [8, 6, 5] (k2 permuted)
  const auto q2 = cases::randn({6, 3, 8}, 81);
  ref::check_close(loses(q = q2, k = k2).cpu(),
                   batched_matmul(permute(ref::from(q2.cpu()), {2, 1, 0}), permute(ref::from(k2.cpu()), {0, 2, 1})));
}

inline void reshape_of_permute_and_permuted_output_copy() {
  constexpr auto a = kiln::input<"a", 3>();
  auto f = kiln::compile(kiln::outputs(kiln::reshape(kiln::permute<1, 2, 0>(a), {-1}), kiln::permute<2, 0, 1>(a)));
  const auto at = cases::randn({3, 4, 5}, 82);
  auto [flat, p] = f(a = at);
  ref::Array want = permute(ref::from(at.cpu()), {1, 2, 0});
  want.shape = {60};
  ref::check_close(flat.cpu(), want, 0, 0);
  ref::check_close(p.cpu(), permute(ref::from(at.cpu()), {2, 0, 1}), 0, 0);
}

// Heads split and merged as an attention layer does: [B, S, H * D] -> [B, H, S, D] -> back, with
// the number of heads a run-time value.
inline void unflatten_and_flatten_heads() {
  constexpr auto x = kiln::input<"x", 3>();
  const long heads = 3;  // from a model's configuration, say
  const auto split = kiln::permute<0, 2, 1, 3>(kiln::unflatten<-1>(x, {heads, -1}));
  auto f = kiln::compile(kiln::outputs(split * 2, kiln::flatten<2, 3>(kiln::permute<0, 2, 1, 3>(split))));
  const auto xt = cases::randn({2, 5, 12}, 83);
  auto [h, back] = f(x = xt);
  REQUIRE(h.shape() == kiln::Shape{2, 3, 5, 4});
  ref::Array r = ref::from(xt.cpu());
  r.shape = {2, 5, 3, 4};
  ref::check_close(h.cpu(), ref::map(permute(r, {0, 2, 1, 3}), [](double v) { return 2 * v; }), 0, 0);
  ref::check_close(back.cpu(), ref::from(xt.cpu()), 0, 0);
  CHECK_THROWS_WITH_AS(f(x = cases::randn({2, 5, 10}, 84)),
                       doctest::Contains("reshape: cannot reshape axes 2 to 2 of [2, 5, 10] into [3, -1]"), kiln::ShapeError);
  auto all = kiln::compile(kiln::flatten(x) + 1);
  CHECK(all(x = xt).shape() == kiln::Shape{120});
}

// ViT's stem against a direct evaluation of the strided convolution.
inline void patch_embed_is_a_strided_convolution() {
  constexpr auto x = kiln::input<"x", 4>();
  constexpr auto w = kiln::input<"w", 4>();
  constexpr auto b = kiln::input<"b", 1>();
  const long p = 4;
  auto f = kiln::compile(kiln::patch_embed(x, w, b, p));
  INFO(f.explain());
  CHECK(f.kernel_count() == 2);  // the patch matrix's copy, the GEMM with the bias in its epilogue
  const std::size_t B = 2, C = 3, H = 8, W = 12, D = 5, P = 4, nh = H / P, nw = W / P;
  const auto xt = cases::randn({B, C, H, W}, 85), wt = cases::randn({D, C, P, P}, 86), bt = cases::randn({D}, 87);
  const auto rx = ref::from(xt.cpu()), rw = ref::from(wt.cpu()), rb = ref::from(bt.cpu());
  ref::Array want = ref::zeros({B, nh * nw, D});
  for (std::size_t n = 0; n < B; ++n)
    for (std::size_t i = 0; i < nh; ++i)
      for (std::size_t j = 0; j < nw; ++j)
        for (std::size_t d = 0; d < D; ++d) {
          double acc = rb.data[d];
          for (std::size_t c = 0; c < C; ++c)
            for (std::size_t u = 0; u < P; ++u)
              for (std::size_t v = 0; v < P; ++v)
                acc += rw.data[ref::ravel({d, c, u, v}, rw.shape)] * rx.data[ref::ravel({n, c, i * P + u, j * P + v}, rx.shape)];
          want.data[ref::ravel({n, i * nw + j, d}, want.shape)] = acc;
        }
  ref::check_close(f(x = xt, w = wt, b = bt).cpu(), want, 1e-5, 1e-5);
  CHECK_THROWS_AS(f(x = cases::randn({B, C, H, 10}, 88), w = wt, b = bt), kiln::ShapeError);  // 10 columns, patches of 4
  CHECK_THROWS_AS(kiln::patch_embed(x, w, 0), kiln::ValueError);
}

inline void permute_gradients() {
  gradcheck::unary<4>("permute", [](auto x) { return kiln::exp(kiln::permute<3, 1, 0, 2>(x)); }, {2, 3, 4, 5}, -1, 1);
  gradcheck::unary<3>("transpose<0, 2> into a GEMM", [](auto x) { return kiln::matmul(kiln::transpose<0, 2>(x), x); },
                      {4, 4, 4}, -1, 1);
  gradcheck::unary<3>("unflatten, permute, flatten", [](auto x) {
    return kiln::flatten<1, 2>(kiln::permute<0, 2, 1, 3>(kiln::unflatten<-1>(kiln::exp(x), {2, -1})));
  }, {2, 3, 4}, -1, 1);
  gradcheck::binary<4, 4>("patch_embed", [](auto x, auto w) { return kiln::patch_embed(x, w, 2); }, {2, 2, 4, 6}, {3, 2, 2, 2},
                          -1, 1);
}

}  // namespace layout_cases
