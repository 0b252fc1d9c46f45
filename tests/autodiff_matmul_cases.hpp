// Reverse mode: matmul, layout and shape-taking ops, against central finite differences in
// float64. Registered by autodiff_matmul.cpp with DEVICE_CASE: on the CPU, and
// on the GPU with the gradients computed there (gradcheck.hpp, on_device.hpp).
#pragma once
#include "gradcheck.hpp"

namespace autodiff_matmul_cases {

inline void matmul_layout_and_shape_ops() {
  using gradcheck::binary, gradcheck::unary;
  binary<2, 2>("matmul", [](auto a, auto b) { return kiln::matmul(a, b); }, {3, 4}, {4, 5}, -1, 1);
  binary<3, 2>("batched matmul, one weight", [](auto a, auto b) { return kiln::matmul(a, b); }, {2, 3, 4}, {4, 5}, -1, 1);
  binary<3, 3>("batched matmul, broadcast batch", [](auto a, auto b) { return kiln::matmul(a, b); }, {1, 3, 4}, {2, 4, 5}, -1, 1);
  binary<2, 2>("matmul of a transpose", [](auto a, auto b) { return kiln::matmul(kiln::transpose(a), b); }, {4, 3}, {4, 5}, -1, 1);
  unary<2>("reshape", [](auto x) { return kiln::reshape(x, {2, -1}) * kiln::reshape(x, {2, -1}); }, {3, 4}, -1, 1);
  unary<2>("unsqueeze", [](auto x) { return kiln::exp(kiln::unsqueeze<1>(x)); }, {3, 4}, -1, 1);
  binary<2, 1>("expand_as and sum_to", [](auto a, auto b) { return kiln::sum_to(a * a, b) * kiln::expand_as(b, a) * 1.0; },
               {3, 4}, {4}, -1, 1);
}

}  // namespace autodiff_matmul_cases
