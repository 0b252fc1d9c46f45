// matmul: the cases are in matmul_cases.hpp (DEVICE_CASE: the GPU runs them too).
#include "matmul_cases.hpp"

using namespace matmul_cases;

DEVICE_CASE("2-D products of many shapes", products_2d_of_many_shapes())
DEVICE_CASE("batched products with a broadcast batch axis", batched_with_broadcast_batch())
DEVICE_CASE("transposed operands are read through strides", transposed_operands_through_strides())
DEVICE_CASE("few output tiles over a long k", few_tiles_over_a_long_k())
DEVICE_CASE("the epilogue: bias, activation, residual, in one kernel", epilogue_bias_activation_residual())
DEVICE_CASE("an epilogue that broadcasts the product to a larger shape", epilogue_broadcasts_product_to_larger_shape())
DEVICE_CASE("batched epilogue with a bias", batched_epilogue_with_bias())
