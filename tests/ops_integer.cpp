// kiln::cast, the pointwise ops on integer tensors, and argmax/argmin: the cases are in
// integer_cases.hpp (DEVICE_CASE: the GPU runs them too).
#include "integer_cases.hpp"

using namespace integer_cases;

DEVICE_CASE("casts between every element type", casts_between_types())
DEVICE_CASE("float casts read through views and consumed by fused kernels", float_casts_through_views())
DEVICE_CASE("pointwise ops on integer tensors", integer_pointwise_ops())
DEVICE_CASE("where with an integer condition, equal and not_equal", where_with_an_integer_condition())
DEVICE_CASE("argmax and argmin along each axis", argmax_and_argmin())
DEVICE_CASE("the gradient through float casts", gradient_through_casts())

TEST_CASE("jvp through a float cast") {
  constexpr auto x = kiln::input<"x", 1, double>();
  constexpr auto dx = kiln::input<"dx", 1, double>();
  auto t = kiln::compile(kiln::jvp(kiln::cast<float>(kiln::square(x)), kiln::tangent(x, dx)));
  const auto xt = kiln::randn<double>({9}, 997), dxt = kiln::randn<double>({9}, 998);
  const auto got = t(x = xt, dx = dxt);
  for (std::size_t i = 0; i < 9; ++i) CHECK(got[i] == static_cast<float>(2 * xt[i] * dxt[i]));
}
