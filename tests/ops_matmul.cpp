// matmul: 2-D and batched, batch broadcast, transposed operands, epilogues, f32 and f64.
#include "reference.hpp"

namespace {

template <int RA, int RB, class T = float>
void check_matmul(const kiln::Shape& sa, const kiln::Shape& sb) {
  constexpr auto a = kiln::input<"a", RA, T>();
  constexpr auto b = kiln::input<"b", RB, T>();
  auto f = kiln::compile(kiln::matmul(a, b));
  auto e = kiln::eager(kiln::matmul(a, b));
  CHECK(f.kernel_count() == 1);
  const auto at = kiln::randn<T>(sa, 51), bt = kiln::randn<T>(sb, 52);
  const auto want = ref::matmul(ref::from(at), ref::from(bt));
  INFO("shapes " << sa.str() << " x " << sb.str());
  const double rtol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  ref::check_close(f(a = at, b = bt), want, rtol, rtol);
  ref::check_close(e(a = at, b = bt), want, rtol, rtol);
}

}  // namespace

TEST_CASE("2-D products of many shapes") {
  check_matmul<2, 2>({7, 5}, {5, 3});
  check_matmul<2, 2>({1, 300}, {300, 257});  // one row: split over columns
  check_matmul<2, 2>({300, 64}, {64, 1});    // one column
  check_matmul<2, 2>({129, 70}, {70, 65});   // row panels
  check_matmul<2, 2>({4, 0}, {0, 3});        // an empty inner dimension: zeros
  check_matmul<2, 2, double>({33, 17}, {17, 9});
}

TEST_CASE("batched products with a broadcast batch axis") {
  check_matmul<3, 3>({4, 6, 5}, {4, 5, 7});
  check_matmul<3, 3>({1, 6, 5}, {4, 5, 7});
  check_matmul<3, 3>({4, 6, 5}, {1, 5, 7});
  check_matmul<3, 2>({4, 6, 5}, {5, 7});  // one weight matrix: a taller GEMM
  check_matmul<2, 3>({6, 5}, {4, 5, 7});
  check_matmul<3, 3, double>({3, 40, 20}, {3, 20, 30});
}

TEST_CASE("transposed operands are read through strides") {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto b = kiln::input<"b", 2>();
  auto f = kiln::compile(kiln::outputs(kiln::matmul(kiln::transpose(a), b), kiln::matmul(a, kiln::transpose(b))));
  const auto at = kiln::randn<float>({20, 30}, 53), bt = kiln::randn<float>({20, 30}, 54);
  auto [p, q] = f(a = at, b = bt);
  ref::check_close(p, ref::matmul(ref::transpose(ref::from(at)), ref::from(bt)), 1e-4, 1e-4);
  ref::check_close(q, ref::matmul(ref::from(at), ref::transpose(ref::from(bt))), 1e-4, 1e-4);
}

TEST_CASE("the epilogue: bias, activation, residual, in one kernel") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  constexpr auto y = kiln::gelu(kiln::matmul(x, w) + b) * 0.5f + kiln::matmul(x, w);
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 1);
  for (const std::size_t m : {1, 5, 64, 130}) {
    const auto xt = kiln::randn<float>({m, 48}, 55), wt = kiln::randn<float>({48, 96}, 56), bt = kiln::randn<float>({96}, 57);
    const auto mm = ref::matmul(ref::from(xt), ref::from(wt));
    const auto want = ref::zip(ref::zip(mm, ref::from(bt), [](double p, double q) { return ref::gelu(p + q) * 0.5; }), mm,
                               [](double p, double q) { return p + q; });
    ref::check_close(f(x = xt, w = wt, b = bt), want, 1e-4, 1e-4);
  }
}

TEST_CASE("an epilogue that broadcasts the product to a larger shape") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::input<"w", 2>();
  constexpr auto z = kiln::input<"z", 2>();
  auto f = kiln::compile(kiln::matmul(x, w) + z);
  CHECK(f.kernel_count() == 1);
  const auto xt = kiln::randn<float>({1, 8}, 58), wt = kiln::randn<float>({8, 6}, 59), zt = kiln::randn<float>({5, 6}, 60);
  const auto want = ref::zip(ref::matmul(ref::from(xt), ref::from(wt)), ref::from(zt), [](double p, double q) { return p + q; });
  ref::check_close(f(x = xt, w = wt, z = zt), want, 1e-5, 1e-5);
}

TEST_CASE("batched epilogue with a bias") {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto w = kiln::input<"w", 3>();
  constexpr auto b = kiln::input<"b", 1>();
  auto f = kiln::compile(kiln::relu(kiln::matmul(x, w) + b));
  CHECK(f.kernel_count() == 1);
  const auto xt = kiln::randn<float>({3, 10, 12}, 61), wt = kiln::randn<float>({3, 12, 14}, 62), bt = kiln::randn<float>({14}, 63);
  const auto want = ref::zip(ref::matmul(ref::from(xt), ref::from(wt)), ref::from(bt),
                             [](double p, double q) { return std::max(p + q, 0.0); });
  ref::check_close(f(x = xt, w = wt, b = bt), want, 1e-5, 1e-5);
}
