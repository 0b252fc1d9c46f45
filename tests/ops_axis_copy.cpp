// concat, slice, extract, insert, chunk and split: the cases are in axis_copy_cases.hpp
// (DEVICE_CASE: the GPU runs them too); forward mode here.
#include "axis_copy_cases.hpp"

using namespace axis_copy_cases;

DEVICE_CASE("concat along each axis", concat_along_each_axis())
DEVICE_CASE("concat reads views and computed values", concat_reads_views_and_computed_values())
DEVICE_CASE("slice along a middle and the last axis", slice_along_a_middle_and_the_last_axis())
DEVICE_CASE("bad shapes are errors naming the op and the shapes", bad_shapes_are_errors())
DEVICE_CASE("a bf16 concat", a_16_bit_concat())
DEVICE_CASE("gradients of concat, slice, extract and insert", gradients())
DEVICE_CASE("chunk and split", chunk_and_split())
DEVICE_CASE("slice, extract and insert at run-time positions", slice_extract_insert_at_run_time_positions())
DEVICE_CASE("gradients of chunk and split", chunk_gradients())
DEVICE_CASE("concat_parts, and the gradient of a value whose every chunk is used", concat_parts_and_the_gradient_of_every_chunk())

TEST_CASE("jvp of chunk") {
  constexpr auto x = kiln::input<"x", 2, double>();
  constexpr auto dx = kiln::input<"dx", 2, double>();
  constexpr auto y = std::get<1>(kiln::chunk<2, -1>(kiln::square(x)));
  auto t = kiln::compile(kiln::jvp(y, kiln::tangent(x, dx)));
  const auto xt = kiln::randn<double>({3, 4}, 323), dxt = kiln::randn<double>({3, 4}, 324);
  const auto got = t(x = xt, dx = dxt);
  REQUIRE(got.shape() == kiln::Shape{3, 2});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) CHECK(std::abs(got[i * 2 + j] - 2 * xt[i * 4 + j + 2] * dxt[i * 4 + j + 2]) <= 1e-12);
}

TEST_CASE("jvp of concat_parts, with every part's tangent and with one part constant") {
  constexpr auto a = kiln::input<"a", 2, double>();
  constexpr auto b = kiln::input<"b", 2, double>();
  constexpr auto da = kiln::input<"da", 2, double>();
  constexpr auto db = kiln::input<"db", 2, double>();
  constexpr auto y = kiln::concat_parts<1>(kiln::square(a), kiln::exp(b));
  auto both = kiln::compile(kiln::jvp(y, kiln::tangent(a, da), kiln::tangent(b, db)));
  auto only_a = kiln::compile(kiln::jvp(y, kiln::tangent(a, da)));
  const auto at = kiln::randn<double>({3, 2}, 331), bt = kiln::randn<double>({3, 2}, 332);
  const auto dat = kiln::randn<double>({3, 2}, 333), dbt = kiln::randn<double>({3, 2}, 334);
  const auto got = both(a = at, b = bt, da = dat, db = dbt), got_a = only_a(a = at, b = bt, da = dat);
  REQUIRE(got.shape() == kiln::Shape{3, 4});
  REQUIRE(got_a.shape() == kiln::Shape{3, 4});
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      const std::size_t e = i * 2 + j;
      CHECK(std::abs(got[i * 4 + j] - 2 * at[e] * dat[e]) <= 1e-12);
      CHECK(std::abs(got[i * 4 + 2 + j] - std::exp(bt[e]) * dbt[e]) <= 1e-12);
      CHECK(std::abs(got_a[i * 4 + j] - 2 * at[e] * dat[e]) <= 1e-12);
      CHECK(got_a[i * 4 + 2 + j] == 0.0);
    }
}

TEST_CASE("jvp of concat with one operand's tangent, and of slice") {
  constexpr auto a = kiln::input<"a", 2, double>();
  constexpr auto b = kiln::input<"b", 2, double>();
  constexpr auto da = kiln::input<"da", 2, double>();
  constexpr auto y = kiln::slice<1, 1, 4>(kiln::concat<0>(kiln::tanh(a), b));
  auto t = kiln::compile(kiln::jvp(y, kiln::tangent(a, da)));
  const auto at = kiln::randn<double>({3, 5}, 320), bt = kiln::randn<double>({2, 5}, 321), dat = kiln::randn<double>({3, 5}, 322);
  // d/da of slice(concat(tanh a, b)) along da: (1 - tanh(a)^2) da in a's rows, 0 in b's, columns 1..3.
  const auto got = t(a = at, b = bt, da = dat);
  REQUIRE(got.shape() == kiln::Shape{5, 3});
  for (std::size_t i = 0; i < 5; ++i)
    for (std::size_t j = 0; j < 3; ++j) {
      const double want = i < 3 ? (1 - std::pow(std::tanh(at[i * 5 + j + 1]), 2)) * dat[i * 5 + j + 1] : 0.0;
      CHECK(std::abs(got[i * 3 + j] - want) <= 1e-12);
    }
}
