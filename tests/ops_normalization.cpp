// softmax, log_softmax and layer_norm the cases are in normalization_cases.hpp
// (DEVICE_CASE: the GPU runs them too).
#include "normalization_cases.hpp"

using namespace normalization_cases;

DEVICE_CASE("softmax and log_softmax, f32 and f64, with large logits", softmax_and_log_softmax_with_large_logits())
// Plans only, no tensors: the same on every device, so the GPU does not repeat it.
TEST_CASE("softmax and log_softmax are one kernel each") {
  constexpr auto x = kiln::input<"x", 2>();
  CHECK(kiln::compile(kiln::softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::log_softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::softmax(x * 0.125f)).kernel_count() == 1);
}
DEVICE_CASE("add + layer_norm, one kernel, f32 and f64", add_and_layer_norm_one_kernel())
DEVICE_CASE("rms_norm (Llama's and Gemma's forms) and layer_norm without a bias, f32 and f64",
            rms_norm_and_layer_norm_without_bias())
// rms_norm over [rows, d] is one row-reduction kernel with one stage (the mean of x^2); the
// rsqrt and the multiplies by it and by the weight are its epilogue over the row.
TEST_CASE("rms_norm is one row kernel with one reduction stage") {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 1>();
  auto f = kiln::compile(kiln::rms_norm(x, w));
  CHECK(f.kernel_count() == 1);
  const std::string plan = f.explain();
  INFO(plan);
  CHECK(plan.find("kernel 0: row reduction -> %8 (output 0) = [square, mean, add, rsqrt, mul, mul]; reads x, w") !=
        std::string::npos);
  using K = kiln::lower::Program<std::remove_cvref_t<decltype(kiln::rms_norm(x, w))>, true>::kernel<0>;
  static_assert(K::nstages == 1);
  CHECK(kiln::compile(kiln::rms_norm(x * 2.0f, 1 + w, 1e-5)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::layer_norm(x, w)).kernel_count() == 1);
}
