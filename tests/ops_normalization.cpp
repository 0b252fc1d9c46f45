// softmax, log_softmax and layer_norm on the CPU: the cases are in normalization_cases.hpp
// (the GPU runs them too).
#include "normalization_cases.hpp"

using namespace normalization_cases;

TEST_CASE("softmax and log_softmax, f32 and f64, with large logits") { softmax_and_log_softmax_with_large_logits(); }
// Plans only, no tensors: the same on every device, so the GPU does not repeat it.
TEST_CASE("softmax and log_softmax are one kernel each") {
  constexpr auto x = kiln::input<"x", 2>();
  CHECK(kiln::compile(kiln::softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::log_softmax(x)).kernel_count() == 1);
  CHECK(kiln::compile(kiln::softmax(x * 0.125f)).kernel_count() == 1);
}
TEST_CASE("add + layer_norm, one kernel, f32 and f64") { add_and_layer_norm_one_kernel(); }
