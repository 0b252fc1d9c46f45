// attention: the cases are in attention_cases.hpp (DEVICE_CASE: the GPU runs them too).
#include "attention_cases.hpp"

using namespace attention_cases;

DEVICE_CASE("attention against a float64 reference", values())
DEVICE_CASE("attention: masks, scales and strided operands", masks_scales_and_strides())
DEVICE_CASE("attention of head_dim 64, 128 and 256 in f32", head_dims<float>(1e-4, 1e-5))
DEVICE_CASE("attention of head_dim 64, 128 and 256 in bf16", head_dims<kiln::bf16>(2e-2, 8e-3))
DEVICE_CASE("attention of head_dim 64, 128 and 256 in f16", head_dims<kiln::f16>(4e-3, 2e-3))
DEVICE_CASE("attention over 4096 positions", long_sequence())
DEVICE_CASE("attention's bad shapes", bad_shapes())
DEVICE_CASE("attention with cache lengths", cache_lengths())
DEVICE_CASE("attention with key windows", key_windows())
DEVICE_CASE("gradients of attention with cache lengths", gradients_with_lengths())
DEVICE_CASE("gradients of attention with key windows", gradients_with_windows())
DEVICE_CASE("gradients of attention", gradients())
DEVICE_CASE("gradients of attention in bf16", gradients_in_bf16())
