// Broadcasting: size-1 dims, rank-0 operands, rank mismatch, on both sides, compiled and eager.
// Registered by ops_broadcast.cpp with DEVICE_CASE: on the CPU, and on the GPU with the inputs
// on the device (on_device.hpp).
#pragma once
#include "on_device.hpp"

namespace broadcast_cases {

template <int RA, int RB>
void check_add_mul_where(const kiln::Shape& sa, const kiln::Shape& sb) {
  constexpr auto a = kiln::input<"a", RA>();
  constexpr auto b = kiln::input<"b", RB>();
  constexpr auto y = kiln::outputs(a + b, a * b - b, kiln::where(a > b, a, b * 0.5f));
  auto f = kiln::compile(y);
  auto e = kiln::eager(y);
  const auto at = cases::randn(sa, 31), bt = cases::randn(sb, 32);
  const auto ra = ref::from(at.cpu()), rb = ref::from(bt.cpu());
  INFO("shapes " << sa.str() << " and " << sb.str());
  CHECK(f.kernel_count() == 3);
  for (auto* g : {&f}) {
    auto [s, p, w] = (*g)(a = at, b = bt);
    ref::check_close(s.cpu(), ref::zip(ra, rb, [](double x, double z) { return x + z; }));
    ref::check_close(p.cpu(), ref::zip(ra, rb, [](double x, double z) { return x * z - z; }));
    ref::check_close(w.cpu(), ref::zip(ra, rb, [](double x, double z) { return x > z ? x : z * 0.5; }));
  }
  auto [s, p, w] = e(a = at, b = bt);
  ref::check_close(s.cpu(), ref::zip(ra, rb, [](double x, double z) { return x + z; }));
  ref::check_close(p.cpu(), ref::zip(ra, rb, [](double x, double z) { return x * z - z; }));
  ref::check_close(w.cpu(), ref::zip(ra, rb, [](double x, double z) { return x > z ? x : z * 0.5; }));
}

inline void equal_shapes() { check_add_mul_where<2, 2>({33, 17}, {33, 17}); }
inline void row_vector_against_matrix() { check_add_mul_where<2, 1>({33, 17}, {17}); }
inline void column_against_matrix() { check_add_mul_where<2, 2>({33, 17}, {33, 1}); }
inline void outer_product_of_size_1_dims() { check_add_mul_where<2, 2>({33, 1}, {1, 17}); }
inline void rank_0_on_either_side() {
  check_add_mul_where<0, 2>({}, {33, 17});
  check_add_mul_where<2, 0>({33, 17}, {});
}
inline void rank_mismatch_with_size_1_dims() { check_add_mul_where<3, 2>({5, 1, 9}, {7, 1}); }
inline void rank_4_against_rank_3() { check_add_mul_where<4, 3>({2, 3, 1, 5}, {3, 4, 1}); }
inline void long_rows() { check_add_mul_where<1, 0>({300001}, {}); }

inline void mixed_broadcast_chain_is_one_kernel() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto col = kiln::input<"col", 3>();
  constexpr auto row = kiln::input<"row", 1>();
  constexpr auto s = kiln::input<"s", 0>();
  constexpr auto y = kiln::exp(x * col + row) * s - 1.0f;
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 1);
  const auto xt = cases::randn({4, 6, 8}, 1), ct = cases::randn({4, 6, 1}, 2);
  const auto rt = cases::randn({8}, 3), st = cases::randn(kiln::Shape{}, 4);
  const auto want = ref::zip(ref::zip3(ref::from(xt.cpu()), ref::from(ct.cpu()), ref::from(rt.cpu()),
                                       [](double p, double q, double r) { return std::exp(p * q + r); }),
                             ref::from(st.cpu()), [](double p, double q) { return p * q - 1.0; });
  ref::check_close(f(x = xt, col = ct, row = rt, s = st).cpu(), want);
}

}  // namespace broadcast_cases
