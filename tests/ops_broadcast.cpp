// Broadcasting: size-1 dims, rank-0 operands, rank mismatch, on both sides, compiled and eager.
#include "reference.hpp"

namespace {

template <int RA, int RB>
void check_add_mul_where(const kiln::Shape& sa, const kiln::Shape& sb) {
  constexpr auto a = kiln::input<"a", RA>();
  constexpr auto b = kiln::input<"b", RB>();
  constexpr auto y = kiln::outputs(a + b, a * b - b, kiln::where(a > b, a, b * 0.5f));
  auto f = kiln::compile(y);
  auto e = kiln::eager(y);
  const auto at = kiln::randn<float>(sa, 31), bt = kiln::randn<float>(sb, 32);
  const auto ra = ref::from(at), rb = ref::from(bt);
  INFO("shapes " << sa.str() << " and " << sb.str());
  CHECK(f.kernel_count() == 3);
  for (auto* g : {&f}) {
    auto [s, p, w] = (*g)(a = at, b = bt);
    ref::check_close(s, ref::zip(ra, rb, [](double x, double z) { return x + z; }));
    ref::check_close(p, ref::zip(ra, rb, [](double x, double z) { return x * z - z; }));
    ref::check_close(w, ref::zip(ra, rb, [](double x, double z) { return x > z ? x : z * 0.5; }));
  }
  auto [s, p, w] = e(a = at, b = bt);
  ref::check_close(s, ref::zip(ra, rb, [](double x, double z) { return x + z; }));
  ref::check_close(p, ref::zip(ra, rb, [](double x, double z) { return x * z - z; }));
  ref::check_close(w, ref::zip(ra, rb, [](double x, double z) { return x > z ? x : z * 0.5; }));
}

}  // namespace

TEST_CASE("equal shapes") { check_add_mul_where<2, 2>({33, 17}, {33, 17}); }
TEST_CASE("a row vector against a matrix") { check_add_mul_where<2, 1>({33, 17}, {17}); }
TEST_CASE("a column against a matrix") { check_add_mul_where<2, 2>({33, 17}, {33, 1}); }
TEST_CASE("an outer product of size-1 dims") { check_add_mul_where<2, 2>({33, 1}, {1, 17}); }
TEST_CASE("a rank-0 tensor on either side") {
  check_add_mul_where<0, 2>({}, {33, 17});
  check_add_mul_where<2, 0>({33, 17}, {});
}
TEST_CASE("rank mismatch with size-1 dims in the middle") { check_add_mul_where<3, 2>({5, 1, 9}, {7, 1}); }
TEST_CASE("rank 4 against rank 3") { check_add_mul_where<4, 3>({2, 3, 1, 5}, {3, 4, 1}); }
TEST_CASE("long rows split across threads") { check_add_mul_where<1, 0>({300001}, {}); }

TEST_CASE("a pointwise chain over mixed broadcasts fuses into one kernel") {
  constexpr auto x = kiln::input<"x", 3>();
  constexpr auto col = kiln::input<"col", 3>();
  constexpr auto row = kiln::input<"row", 1>();
  constexpr auto s = kiln::input<"s", 0>();
  constexpr auto y = kiln::exp(x * col + row) * s - 1.0f;
  auto f = kiln::compile(y);
  CHECK(f.kernel_count() == 1);
  const auto xt = kiln::randn<float>({4, 6, 8}, 1), ct = kiln::randn<float>({4, 6, 1}, 2);
  const auto rt = kiln::randn<float>({8}, 3), st = kiln::randn<float>(kiln::Shape{}, 4);
  const auto want = ref::zip(
      ref::zip3(ref::from(xt), ref::from(ct), ref::from(rt), [](double p, double q, double r) { return std::exp(p * q + r); }),
      ref::from(st), [](double p, double q) { return p * q - 1.0; });
  ref::check_close(f(x = xt, col = ct, row = rt, s = st), want);
}
