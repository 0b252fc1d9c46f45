// Reverse mode on the GPU: the CPU suites' pointwise rules (autodiff_pointwise_cases.hpp),
// unary and binary with broadcasting, with the gradients computed on the device in float64,
// against central finite differences computed on the CPU, with the CPU's tolerances. Part of
// test_cuda_pointwise.
#include "../autodiff_pointwise_cases.hpp"

using cases::OnGpu;

TEST_SUITE("pointwise gradients on the GPU") {
  TEST_CASE_FIXTURE(OnGpu, "unary pointwise rules") { autodiff_pointwise_cases::unary_rules(); }
  TEST_CASE_FIXTURE(OnGpu, "binary pointwise rules, with broadcasting") { autodiff_pointwise_cases::binary_rules(); }
}
