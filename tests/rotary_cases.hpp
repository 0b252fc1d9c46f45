// swap_halves and rope (rotary position embedding) against a float64 reference written from
// Hugging Face's apply_rotary_pos_emb: tables, values in f32 and bf16, positions that are not
// 0..S-1, bad shapes and arguments, and gradients by finite differences. Registered by
// ops_rotary.cpp, with DEVICE_CASE for those the GPU runs too (on_device.hpp).
#pragma once
#include <cmath>
#include <vector>

#include "gradcheck.hpp"

namespace rotary_cases {

// HF's layout: element j of a row is paired with j + D/2; the pair at column i (i < D/2) of
// position p turns by p theta^(-2i/D).
inline double angle(long position, std::size_t column, std::size_t head_dim, double theta) {
  const std::size_t i = column % (head_dim / 2);
  return static_cast<double>(position) * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
}

// rope of x ([..., S, D], row s at positions[s]), from the rotation formula, not from tables.
inline ref::Array rope(const ref::Array& x, const std::vector<long>& positions, double theta) {
  const std::size_t d = x.shape.back(), s = x.shape[x.shape.size() - 2], h = d / 2;
  ref::Array out = x;
  for (std::size_t row = 0; row < x.numel() / d; ++row) {
    const long p = positions[row % s];
    for (std::size_t j = 0; j < h; ++j) {
      const double a = angle(p, j, d, theta), x1 = x.data[row * d + j], x2 = x.data[row * d + j + h];
      out.data[row * d + j] = x1 * std::cos(a) - x2 * std::sin(a);
      out.data[row * d + j + h] = x2 * std::cos(a) + x1 * std::sin(a);
    }
  }
  return out;
}

// The same from [S, D] tables (as given, so rounded to a 16-bit type if they are).
inline ref::Array rope(const ref::Array& x, const ref::Array& c, const ref::Array& sn) {
  const std::size_t d = x.shape.back(), s = x.shape[x.shape.size() - 2], h = d / 2;
  ref::Array out = x;
  for (std::size_t row = 0; row < x.numel() / d; ++row) {
    const std::size_t t = (row % s) * d;
    for (std::size_t j = 0; j < d; ++j) {
      const double rotated = j < h ? -x.data[row * d + j + h] : x.data[row * d + j - h];
      out.data[row * d + j] = x.data[row * d + j] * c.data[t + j] + rotated * sn.data[t + j];
    }
  }
  return out;
}

inline void swap_halves_along_the_last_and_a_middle_axis() {
  constexpr auto x = kiln::input<"x", 3>();
  auto last = kiln::compile(kiln::swap_halves<-1>(x));
  auto mid = kiln::compile(kiln::swap_halves<1>(x) * 2);
  const auto xt = cases::randn({3, 6, 10}, 401);
  const auto got_last = last(x = xt).cpu(), got_mid = mid(x = xt).cpu(), host = xt.cpu();
  for (std::size_t a = 0; a < 3; ++a)
    for (std::size_t b = 0; b < 6; ++b)
      for (std::size_t c = 0; c < 10; ++c) {
        const std::size_t at = (a * 6 + b) * 10 + c;
        CHECK(got_last[at] == host[(a * 6 + b) * 10 + (c + 5) % 10]);
        CHECK(got_mid[at] == 2 * host[(a * 6 + (b + 3) % 6) * 10 + c]);
      }
  CHECK_THROWS_WITH_AS(last(x = cases::randn({2, 3, 7}, 402)),
                       doctest::Contains("swap_halves along axis 2 of shape [2, 3, 7]: the extent must be even"),
                       kiln::ShapeError);
}

inline void tables_hold_the_angles_of_each_position() {
  const std::vector<long> positions{0, 5, 4095};
  const auto [c, s] = kiln::rope_tables<double>(positions, 8, 500000.0);
  REQUIRE(c.shape() == kiln::Shape{3, 8});
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t j = 0; j < 8; ++j) {
      CHECK(c[r * 8 + j] == std::cos(angle(positions[r], j, 8, 500000.0)));
      CHECK(s[r * 8 + j] == std::sin(angle(positions[r], j, 8, 500000.0)));
    }
  CHECK_THROWS_AS(kiln::rope_tables(4, 7), kiln::ValueError);
  CHECK_THROWS_AS(kiln::rope_tables(4, 8, 0.5), kiln::ValueError);
  CHECK_THROWS_AS(kiln::rope_tables(-1, 8), kiln::ValueError);
}

// x [B, H, S, D] against [S, D] tables, as a Llama attention layer applies it to q and k.
template <class T>
void rope_matches_the_rotation(double rtol = ref::Tol<T>::rtol, double atol = ref::Tol<T>::atol) {
  constexpr auto x = kiln::input<"x", 4, T>();
  constexpr auto cos = kiln::input<"cos", 2, T>();
  constexpr auto sin = kiln::input<"sin", 2, T>();
  auto f = kiln::compile(kiln::rope(x, cos, sin));
  CHECK(f.explain().find("axis copy") != std::string::npos);
  const std::vector<long> positions{3, 0, 17, 1000, 9};
  for (const std::size_t d : {std::size_t{8}, std::size_t{64}, std::size_t{6}}) {
    INFO("head_dim " << d);
    const auto [ct, st] = kiln::rope_tables<T>(positions, static_cast<long>(d), 10000.0, cases::device());
    const auto xt = cases::randn({2, 3, 5, d}, 403 + d).template as<T>();
    const auto got = f(x = xt, cos = ct, sin = st).cpu();
    const ref::Array rx = ref::from(xt.cpu());
    // In f32 and f64 the tables are the angles' cos and sin to within the type's rounding, so
    // the result is the rotation's; in 16 bits the tables' own rounding (2^-9 relative in bf16)
    // is larger than the result's, and the reference takes the tables as they are.
    if constexpr (sizeof(T) >= 4) ref::check_close(got, rope(rx, positions, 10000.0), rtol, atol);
    ref::check_close(got, rope(rx, ref::from(ct.cpu()), ref::from(st.cpu())), rtol, atol);
  }
}

inline void bad_tables_are_shape_errors() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto cos = kiln::input<"cos", 2>();
  constexpr auto sin = kiln::input<"sin", 2>();
  auto f = kiln::compile(kiln::rope(x, cos, sin));
  const auto [ct, st] = kiln::rope_tables(4, 8, 10000.0, cases::device());
  CHECK_THROWS_AS(f(x = cases::randn({2, 5, 8}, 404), cos = ct, sin = st), kiln::ShapeError);  // 5 positions, 4 rows
  const auto [c7, s7] = kiln::rope_tables(4, 6, 10000.0, cases::device());
  CHECK_THROWS_AS(f(x = cases::randn({2, 4, 8}, 405), cos = c7, sin = s7), kiln::ShapeError);  // head_dim 8, tables 6
}

// With respect to x and to the angles (cos and sin of one tensor b).
inline void gradients() {
  gradcheck::unary<3>("swap_halves<1>", [](auto x) { return kiln::exp(kiln::swap_halves<1>(x)); }, {2, 4, 3}, -1, 1);
  gradcheck::binary<4, 2>("rope", [](auto x, auto b) { return kiln::rope(x, kiln::cos(b), kiln::sin(b)); }, {2, 2, 3, 6},
                          {3, 6}, -2, 2);
}

}  // namespace rotary_cases
