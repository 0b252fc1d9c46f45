// Reverse mode: matmul, layout and shape-taking ops; the cases are in
// autodiff_matmul_cases.hpp (DEVICE_CASE: the GPU runs them too).
#include "autodiff_matmul_cases.hpp"

DEVICE_CASE("matmul, transpose, reshape and the shape-taking ops", autodiff_matmul_cases::matmul_layout_and_shape_ops())
