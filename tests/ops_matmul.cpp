// matmul on the CPU: the cases are in matmul_cases.hpp (the GPU runs them too).
#include "matmul_cases.hpp"

using namespace matmul_cases;

TEST_CASE("2-D products of many shapes") { products_2d_of_many_shapes(); }
TEST_CASE("batched products with a broadcast batch axis") { batched_with_broadcast_batch(); }
TEST_CASE("transposed operands are read through strides") { transposed_operands_through_strides(); }
TEST_CASE("the epilogue: bias, activation, residual, in one kernel") { epilogue_bias_activation_residual(); }
TEST_CASE("an epilogue that broadcasts the product to a larger shape") { epilogue_broadcasts_product_to_larger_shape(); }
TEST_CASE("batched epilogue with a bias") { batched_epilogue_with_bias(); }
