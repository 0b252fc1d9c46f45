// Pointwise ops in float32 against the float64 reference, on the CPU and the GPU (DEVICE_CASE).
#include "pointwise_cases.hpp"

DEVICE_CASE("unary pointwise ops, f32", pointwise_cases::all_unary<float>())
DEVICE_CASE("binary pointwise ops, f32", pointwise_cases::all_binary<float>())

TEST_CASE("NaN propagates through maximum, minimum and relu like PyTorch") {
  constexpr auto a = kiln::input<"a", 1>();
  constexpr auto b = kiln::input<"b", 1>();
  auto f = kiln::compile(kiln::outputs(kiln::maximum(a, b), kiln::minimum(a, b), kiln::relu(a)));
  kiln::Tensor<float> at({2}), bt({2});
  at[0] = std::nanf("");
  at[1] = 1.0f;
  bt[0] = 1.0f;
  bt[1] = std::nanf("");
  auto [mx, mn, r] = f(a = at, b = bt);
  CHECK(std::isnan(mx[0]));
  CHECK(std::isnan(mx[1]));
  CHECK(std::isnan(mn[0]));
  CHECK(std::isnan(mn[1]));
  CHECK(std::isnan(r[0]));
  CHECK(r[1] == 1.0f);
}
