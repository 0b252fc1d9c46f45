// matmul: 2-D and batched, batch broadcast, transposed operands, epilogues, f32 and f64.
// Registered by ops_matmul.cpp with DEVICE_CASE: on the CPU, and on the GPU with the inputs
// on the device (on_device.hpp): cuBLASLt in f32 (no TF32) and f64, the
// small-product kernel for m <= 4, epilogues as cuBLASLt's or as a row kernel.
#pragma once
#include "on_device.hpp"

namespace matmul_cases {

template <int RA, int RB, class T = float>
void check_matmul(const kiln::Shape& sa, const kiln::Shape& sb) {
  constexpr auto a = kiln::input<"a", RA, T>();
  constexpr auto b = kiln::input<"b", RB, T>();
  auto f = kiln::compile(kiln::matmul(a, b));
  auto e = kiln::eager(kiln::matmul(a, b));
  CHECK(f.kernel_count() == 1);
  const auto at = cases::randn<T>(sa, 51), bt = cases::randn<T>(sb, 52);
  const auto want = ref::matmul(ref::from(at.cpu()), ref::from(bt.cpu()));
  INFO("shapes " << sa.str() << " x " << sb.str());
  const double rtol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  ref::check_close(f(a = at, b = bt).cpu(), want, rtol, rtol);
  ref::check_close(e(a = at, b = bt).cpu(), want, rtol, rtol);
}

inline void products_2d_of_many_shapes() {
  check_matmul<2, 2>({7, 5}, {5, 3});
  check_matmul<2, 2>({1, 300}, {300, 257});  // one row: split over columns
  check_matmul<2, 2>({300, 64}, {64, 1});    // one column
  check_matmul<2, 2>({129, 70}, {70, 65});   // row panels
  check_matmul<2, 2>({4, 0}, {0, 3});        // an empty inner dimension: zeros
  check_matmul<2, 2, double>({33, 17}, {17, 9});
}

inline void batched_with_broadcast_batch() {
  check_matmul<3, 3>({4, 6, 5}, {4, 5, 7});
  check_matmul<3, 3>({1, 6, 5}, {4, 5, 7});
  check_matmul<3, 3>({4, 6, 5}, {1, 5, 7});
  check_matmul<3, 2>({4, 6, 5}, {5, 7});  // one weight matrix: a taller GEMM
  check_matmul<2, 3>({6, 5}, {4, 5, 7});
  check_matmul<3, 3, double>({3, 40, 20}, {3, 20, 30});
}

inline void transposed_operands_through_strides() {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 2>();
  auto f = kiln::compile(kiln::outputs(kiln::matmul(kiln::transpose(a), b), kiln::matmul(a, kiln::transpose(b))));
  const auto at = cases::randn({20, 30}, 53), bt = cases::randn({20, 30}, 54);
  const auto ra = ref::from(at.cpu()), rb = ref::from(bt.cpu());
  auto [p, q] = f(a = at, b = bt);
  ref::check_close(p.cpu(), ref::matmul(ref::transpose(ra), rb), 1e-4, 1e-4);
  ref::check_close(q.cpu(), ref::matmul(ra, ref::transpose(rb)), 1e-4, 1e-4);
}

// Few output tiles over a long k (a narrow layer's weight gradient x^T dz over many rows): on
// the GPU cuBLASLt is asked for an algorithm that splits k (cuda::prefer_split_k), its parts
// added in a fixed order. The char-GPT head's [128, 2048] x [2048, 114] with A a transposed
// view; A row-major; B a transposed view; and an epilogue after the product.
inline void few_tiles_over_a_long_k() {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 2>();
  constexpr auto z = kiln::input<"z", 2>();
  auto f = kiln::compile(kiln::matmul(kiln::transpose(a), b));
  const auto at = cases::randn({2048, 128}, 61), bt = cases::randn({2048, 114}, 62);
  ref::check_close(f(a = at, b = bt).cpu(), ref::matmul(ref::transpose(ref::from(at.cpu())), ref::from(bt.cpu())), 1e-4, 1e-4);
  // On the H100 and H200 cuBLASLt splits this product's k (explain() names its first algorithm's split).
  if (cases::device().is_cuda()) CHECK(f.explain().find("splits k into 1;") == std::string::npos);
  auto g = kiln::compile(kiln::outputs(kiln::matmul(a, kiln::transpose(b)), kiln::matmul(a, kiln::transpose(b)) * 2.0f + z));
  const auto ct = cases::randn({96, 1501}, 63), dt = cases::randn({42, 1501}, 64), zt = cases::randn({96, 42}, 65);
  auto [u, v] = g(a = ct, b = dt, z = zt);
  const auto want = ref::matmul(ref::from(ct.cpu()), ref::transpose(ref::from(dt.cpu())));
  ref::check_close(u.cpu(), want, 1e-4, 1e-4);
  ref::check_close(v.cpu(), ref::zip(want, ref::from(zt.cpu()), [](double x, double y) { return 2 * x + y; }), 1e-4, 1e-4);
  check_matmul<2, 2>({64, 3000}, {3000, 66});  // A and B row-major
}

inline void epilogue_bias_activation_residual() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  constexpr auto y = kiln::gelu(kiln::matmul(x, w) + b) * 0.5f + kiln::matmul(x, w);
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 1);
  for (const std::size_t m : {1, 5, 64, 130}) {
    const auto xt = cases::randn({m, 48}, 55), wt = cases::randn({48, 96}, 56), bt = cases::randn({96}, 57);
    const auto mm = ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu()));
    const auto want = ref::zip(ref::zip(mm, ref::from(bt.cpu()), [](double p, double q) { return ref::gelu(p + q) * 0.5; }), mm,
                               [](double p, double q) { return p + q; });
    ref::check_close(f(x = xt, w = wt, b = bt).cpu(), want, 1e-4, 1e-4);
  }
}

inline void epilogue_broadcasts_product_to_larger_shape() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::input<"w", 2>();
  constexpr auto z = kiln::input<"z", 2>();
  auto f = kiln::compile(kiln::matmul(x, w) + z);
  CHECK(f.kernel_count() == 1);
  const auto xt = cases::randn({1, 8}, 58), wt = cases::randn({8, 6}, 59), zt = cases::randn({5, 6}, 60);
  const auto want =
      ref::zip(ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu())), ref::from(zt.cpu()), [](double p, double q) { return p + q; });
  ref::check_close(f(x = xt, w = wt, z = zt).cpu(), want, 1e-5, 1e-5);
}

inline void batched_epilogue_with_bias() {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto w = kiln::input<"w", 3>();
  constexpr auto b = kiln::input<"b", 1>();
  auto f = kiln::compile(kiln::relu(kiln::matmul(x, w) + b));
  CHECK(f.kernel_count() == 1);
  const auto xt = cases::randn({3, 10, 12}, 61), wt = cases::randn({3, 12, 14}, 62), bt = cases::randn({14}, 63);
  const auto want = ref::zip(ref::matmul(ref::from(xt.cpu()), ref::from(wt.cpu())), ref::from(bt.cpu()),
                             [](double p, double q) { return std::max(p + q, 0.0); });
  ref::check_close(f(x = xt, w = wt, b = bt).cpu(), want, 1e-5, 1e-5);
}

}  // namespace matmul_cases
