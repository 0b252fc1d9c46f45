// matmul and the row ops (softmax, log_softmax, layer_norm, rms_norm) on the GPU: the CPU suites' cases
// (matmul_cases.hpp, normalization_cases.hpp) with the inputs on the device, against the
// float64 reference with the CPU's tolerances (cuBLASLt computes f32 products in f32, without
// TF32, so the CPU's 1e-4 holds). Part of test_cuda_ops_suites.
#include "../matmul_cases.hpp"
#include "../normalization_cases.hpp"

using cases::OnGpu;

TEST_SUITE("matmul on the GPU") {
  using namespace matmul_cases;
  TEST_CASE_FIXTURE(OnGpu, "2-D products of many shapes") { products_2d_of_many_shapes(); }
  TEST_CASE_FIXTURE(OnGpu, "batched products with a broadcast batch axis") { batched_with_broadcast_batch(); }
  TEST_CASE_FIXTURE(OnGpu, "transposed operands are read through strides") { transposed_operands_through_strides(); }
  TEST_CASE_FIXTURE(OnGpu, "the epilogue: bias, activation, residual, in one kernel") { epilogue_bias_activation_residual(); }
  TEST_CASE_FIXTURE(OnGpu, "an epilogue that broadcasts the product to a larger shape") {
    epilogue_broadcasts_product_to_larger_shape();
  }
  TEST_CASE_FIXTURE(OnGpu, "batched epilogue with a bias") { batched_epilogue_with_bias(); }
}

// "softmax and log_softmax are one kernel each" stays in the CPU suite: it checks plans only.
TEST_SUITE("normalization on the GPU") {
  using namespace normalization_cases;
  TEST_CASE_FIXTURE(OnGpu, "softmax and log_softmax, f32 and f64, with large logits") {
    softmax_and_log_softmax_with_large_logits();
  }
  TEST_CASE_FIXTURE(OnGpu, "add + layer_norm, one kernel, f32 and f64") { add_and_layer_norm_one_kernel(); }
  TEST_CASE_FIXTURE(OnGpu, "rms_norm (Llama's and Gemma's forms) and layer_norm without a bias, f32 and f64") {
    rms_norm_and_layer_norm_without_bias();
  }
}
