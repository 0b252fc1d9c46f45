// Reverse mode on the GPU: the CPU suites' gradient cases (autodiff_reduce_cases.hpp,
// autodiff_matmul_cases.hpp) with the gradients computed on the device, against central finite
// differences computed on the CPU in float64, with the CPU's tolerances. Part of
// test_cuda_reduce.
#include "../autodiff_matmul_cases.hpp"
#include "../autodiff_reduce_cases.hpp"

using cases::OnGpu;

TEST_SUITE("gradients on the GPU") {
  TEST_CASE_FIXTURE(OnGpu, "reductions") { autodiff_reduce_cases::reductions(); }
  TEST_CASE_FIXTURE(OnGpu, "row ops: softmax, log_softmax, layer_norm") { autodiff_reduce_cases::row_ops(); }
  TEST_CASE_FIXTURE(OnGpu, "row ops: rms_norm and layer_norm without a bias") {
    autodiff_reduce_cases::rms_norm_and_layer_norm_without_bias();
  }
  TEST_CASE_FIXTURE(OnGpu, "matmul, transpose, reshape and the shape-taking ops") {
    autodiff_matmul_cases::matmul_layout_and_shape_ops();
  }
}
