// concat, slice, extract and insert on the CPU: the cases are in axis_copy_cases.hpp (the GPU
// runs them too); forward mode here.
#include "axis_copy_cases.hpp"

using namespace axis_copy_cases;

TEST_CASE("concat along each axis") { concat_along_each_axis(); }
TEST_CASE("concat reads views and computed values") { concat_reads_views_and_computed_values(); }
TEST_CASE("slice along a middle and the last axis") { slice_along_a_middle_and_the_last_axis(); }
TEST_CASE("bad shapes are errors naming the op and the shapes") { bad_shapes_are_errors(); }
TEST_CASE("a bf16 concat") { a_16_bit_concat(); }
TEST_CASE("gradients of concat, slice, extract and insert") { gradients(); }

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
