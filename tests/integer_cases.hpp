// Integer tensors beyond indices: kiln::cast between every pair of element types (truncation,
// NaN, saturation, wrap-around, rounding), the pointwise ops exact on integers (+, -, *,
// maximum, minimum, abs, comparisons, equal, not_equal, where), where with an integer condition
// over float values, and argmax/argmin along each axis (ties, NaN, 16-bit inputs with more
// positions than their significand holds). Checked exactly against values computed here in
// int64 and double. Registered by ops_integer.cpp with DEVICE_CASE: on the CPU, and on the GPU
// with the inputs on the device (on_device.hpp).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "gradcheck.hpp"

namespace integer_cases {

template <class T>
kiln::Tensor<T> on_device(const std::vector<T>& v, const kiln::Shape& s) {
  return kiln::from_vector<T>(v, s).to(cases::device());
}

inline void casts_between_types() {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto n = kiln::input<"n", 1, kiln::i64>();
  auto to_int = kiln::compile(kiln::outputs(kiln::cast<kiln::i32>(x), kiln::cast<kiln::i64>(x)));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xv{3.7f, -3.7f, 2.5f, -0.5f, nan, inf, -inf, 1e10f, -1e10f, 1e20f, -1e20f, 2147483520.0f};
  const auto [a, b] = to_int(x = on_device(xv, {12}));
  const std::vector<std::int32_t> want32{3, -3, 2, 0, 0, 2147483647, -2147483647 - 1, 2147483647, -2147483647 - 1,
                                         2147483647, -2147483647 - 1, 2147483520};
  const std::vector<std::int64_t> want64{3, -3, 2, 0, 0, INT64_MAX, INT64_MIN, 10000000000LL, -10000000000LL,
                                         INT64_MAX, INT64_MIN, 2147483520};
  const auto ac = a.cpu();
  const auto bc = b.cpu();
  for (std::size_t i = 0; i < xv.size(); ++i) {
    INFO("element " << i << ": " << xv[i]);
    CHECK(ac[i] == want32[i]);
    CHECK(bc[i] == want64[i]);
  }
  // From integers: rounding to float and bf16, the low 32 bits to i32, exact to double.
  auto from_int = kiln::compile(kiln::outputs(kiln::cast<float>(n), kiln::cast<kiln::bf16>(n), kiln::cast<kiln::i32>(n),
                                              kiln::cast<double>(n)));
  const std::vector<std::int64_t> nv{7, -7, 16777217, (std::int64_t{1} << 32) + 5, -(std::int64_t{1} << 40) - 3, 257};
  const auto [f, h, w, d] = from_int(n = on_device(nv, {6}));
  const auto fc = f.cpu();
  const auto hc = h.cpu();
  const auto wc = w.cpu();
  const auto dc = d.cpu();
  for (std::size_t i = 0; i < nv.size(); ++i) {
    INFO("element " << i << ": " << nv[i]);
    CHECK(fc[i] == static_cast<float>(nv[i]));
    CHECK(hc[i].bits == kiln::bf16(static_cast<float>(nv[i])).bits);
    CHECK(wc[i] == static_cast<std::int32_t>(static_cast<std::uint32_t>(nv[i])));
    CHECK(dc[i] == static_cast<double>(nv[i]));
  }
}

// Float to float, read through strides (a transposed operand), and consumed by a fused kernel.
inline void float_casts_through_views() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto y = kiln::input<"y", 2, double>();
  auto f = kiln::compile(kiln::outputs(kiln::cast<kiln::bf16>(kiln::transpose(x)), kiln::cast<double>(x) * 2.0 + y));
  const auto xt = cases::randn({5, 9}, 961);
  const auto yt = cases::randn<double>({5, 9}, 962);
  const auto [b, s] = f(x = xt, y = yt);
  const auto xc = xt.cpu();
  const auto yc = yt.cpu(), sc = s.cpu();
  const auto bc = b.cpu();
  REQUIRE(bc.shape() == kiln::Shape{9, 5});
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 9; ++j) {
      CHECK(bc[j * 5 + i].bits == kiln::bf16(xc[i * 9 + j]).bits);
      CHECK(sc[i * 9 + j] == static_cast<double>(xc[i * 9 + j]) * 2.0 + yc[i * 9 + j]);
    }
}

// +, -, *, maximum, minimum, abs, comparisons and where on i64 and i32, exact.
inline void integer_pointwise_ops() {
  constexpr auto a = kiln::input<"a", 2, kiln::i64>();
  constexpr auto b = kiln::input<"b", 2, kiln::i64>();
  constexpr auto c = kiln::input<"c", 1, kiln::i32>();
  auto f = kiln::compile(kiln::outputs(a * 3 - b + 1, kiln::maximum(a, b), kiln::minimum(a, 4), kiln::abs(a - 10),
                                       kiln::where(a >= b, a, b * -1), kiln::equal(a, b) + kiln::not_equal(a, 2) * 10,
                                       (c < 3) + (c > 5) * 2 + (c <= 0) * 4 + (-c)));
  const auto at = kiln::randint<kiln::i64>(0, 12, {4, 7}, 971), bt = kiln::randint<kiln::i64>(0, 12, {1, 7}, 972);
  const auto ct = kiln::randint<kiln::i32>(-4, 9, {9}, 973);
  const auto [s, mx, mn, ab, w, eq, cmp] = f(a = at.to(cases::device()), b = bt.to(cases::device()), c = ct.to(cases::device()));
  const auto sc = s.cpu(), mxc = mx.cpu(), mnc = mn.cpu(), abc = ab.cpu(), wcc = w.cpu(), eqc = eq.cpu();
  const auto cmc = cmp.cpu();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 7; ++j) {
      const std::int64_t x = at[i * 7 + j], y = bt[j];
      const std::size_t k = i * 7 + j;
      CHECK(sc[k] == x * 3 - y + 1);
      CHECK(mxc[k] == std::max(x, y));
      CHECK(mnc[k] == std::min<std::int64_t>(x, 4));
      CHECK(abc[k] == std::abs(x - 10));
      CHECK(wcc[k] == (x >= y ? x : -y));
      CHECK(eqc[k] == (x == y) + (x != 2) * 10);
    }
  for (std::size_t i = 0; i < 9; ++i) {
    const std::int32_t x = ct[i];
    CHECK(cmc[i] == (x < 3) + (x > 5) * 2 + (x <= 0) * 4 - x);
  }
}

// where with an integer condition over float values (the condition is cast first), and equal
// and not_equal on floats.
inline void where_with_an_integer_condition() {
  constexpr auto ids = kiln::input<"ids", 2, kiln::i64>();
  constexpr auto x = kiln::input<"x", 2>();
  auto f = kiln::compile(kiln::outputs(kiln::where(kiln::not_equal(ids, 0), x, -1e9f), kiln::equal(x, kiln::maximum(x, 0.0f))));
  const auto idt = kiln::randint<kiln::i64>(0, 3, {3, 8}, 981);
  const auto xt = cases::randn({3, 8}, 982);
  const auto [m, e] = f(ids = idt.to(cases::device()), x = xt);
  const auto xc = xt.cpu(), mc = m.cpu(), ec = e.cpu();
  for (std::size_t i = 0; i < 24; ++i) {
    CHECK(mc[i] == (idt[i] != 0 ? xc[i] : -1e9f));
    CHECK(ec[i] == (xc[i] >= 0 ? 1.0f : 0.0f));
  }
}

// The first position of the largest (smallest) value of each row along `axis`, NaN counting as
// the largest (smallest), computed here in double.
template <class T>
std::vector<std::int64_t> arg_reference(const kiln::Tensor<T>& x, int axis, bool largest) {
  const auto& s = x.shape();
  std::size_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (std::size_t d = static_cast<std::size_t>(axis) + 1; d < s.size(); ++d) inner *= s[d];
  const std::size_t n = s[axis];
  std::vector<std::int64_t> out(outer * inner);
  for (std::size_t o = 0; o < outer; ++o)
    for (std::size_t i = 0; i < inner; ++i) {
      std::size_t best = 0;
      double bv = static_cast<double>(kiln::widen(x[o * n * inner + i]));
      for (std::size_t j = 1; j < n && bv == bv; ++j) {
        const double v = static_cast<double>(kiln::widen(x[(o * n + j) * inner + i]));
        if (v != v || (largest ? v > bv : v < bv)) best = j, bv = v;
      }
      out[o * inner + i] = static_cast<std::int64_t>(best);
    }
  return out;
}

inline void argmax_and_argmin() {
  constexpr auto x = kiln::input<"x", 3>();
  auto f = kiln::compile(kiln::outputs(kiln::argmax<-1>(x), kiln::argmin<-1>(x), kiln::argmax<0>(x), kiln::argmin<1, true>(x)));
  auto xt = kiln::randn<float>({3, 4, 37}, 991);
  for (std::size_t j = 0; j < 37; ++j) xt[(1 * 4 + 2) * 37 + j] = static_cast<float>(j % 5);  // ties: first 4 at 4
  xt[(2 * 4 + 1) * 37 + 20] = std::numeric_limits<float>::quiet_NaN();                        // NaN wins at 20
  xt[(2 * 4 + 1) * 37 + 30] = std::numeric_limits<float>::quiet_NaN();
  const auto [amax, amin, amax0, amin1] = f(x = xt.to(cases::device()));
  REQUIRE(amax.shape() == kiln::Shape{3, 4});
  REQUIRE(amax0.shape() == kiln::Shape{4, 37});
  REQUIRE(amin1.shape() == kiln::Shape{3, 1, 37});
  const std::pair<const kiln::Tensor<kiln::i64>*, std::vector<std::int64_t>> checks[] = {
      {&amax, arg_reference(xt, 2, true)}, {&amin, arg_reference(xt, 2, false)},
      {&amax0, arg_reference(xt, 0, true)}, {&amin1, arg_reference(xt, 1, false)}};
  for (const auto& [got, want] : checks) {
    const auto g = got->cpu();
    REQUIRE(g.numel() == want.size());
    int bad = 0;
    for (std::size_t i = 0; i < want.size(); ++i) bad += g[i] != want[i];
    CHECK(bad == 0);
  }
  CHECK(amax.cpu()[1 * 4 + 2] == 4);
  CHECK(amax.cpu()[2 * 4 + 1] == 20);
  // bf16 logits over 1000 positions: the positions are counted in float, not in bf16's 8 bits.
  constexpr auto l = kiln::input<"l", 2, kiln::bf16>();
  auto g = kiln::compile(kiln::argmax<1>(l));
  auto lt = kiln::randn<kiln::bf16>({2, 1000}, 992);
  lt[777] = kiln::bf16(100.0f);
  lt[1000 + 999] = kiln::bf16(100.0f);
  const auto r = g(l = lt.to(cases::device())).cpu();
  CHECK(r[0] == 777);
  CHECK(r[1] == 999);
}

// The derivative of a cast between float types is the cast back: d/dx sum(cast<double>(
// cast<float>(x)) * r) is r rounded to float.
inline void gradient_through_casts() {
  constexpr auto x = kiln::input<"x", 1, double>();
  constexpr auto r = kiln::input<"r", 1, double>();
  constexpr auto loss = kiln::sum(kiln::cast<double>(kiln::cast<float>(x)) * r);
  auto [gx] = kiln::grad(loss, x);
  auto g = kiln::compile(gx);
  const auto xt = kiln::randn<double>({33}, 995), rt = kiln::randn<double>({33}, 996);
  const auto got = g(x = xt.to(cases::device()), r = rt.to(cases::device())).cpu();
  for (std::size_t i = 0; i < 33; ++i) CHECK(got[i] == static_cast<double>(static_cast<float>(rt[i])));
}

}  // namespace integer_cases
