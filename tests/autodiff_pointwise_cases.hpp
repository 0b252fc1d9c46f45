// Reverse mode: the pointwise rules, unary and binary (with broadcasting), against central
// finite differences in float64. Registered by autodiff_unary.cpp and autodiff_binary.cpp with
// DEVICE_CASE: on the CPU, and on the GPU with the gradients computed there (gradcheck.hpp,
// on_device.hpp).
#pragma once
#include "gradcheck.hpp"

namespace autodiff_pointwise_cases {

inline void unary_rules() {
  using gradcheck::unary;
  const kiln::Shape s{3, 5};
  unary<2>("neg", [](auto x) { return -x; }, s, -2, 2);
  unary<2>("exp", [](auto x) { return kiln::exp(x); }, s, -2, 2);
  unary<2>("log", [](auto x) { return kiln::log(x); }, s, 0.5, 3);
  unary<2>("sqrt", [](auto x) { return kiln::sqrt(x); }, s, 0.5, 3);
  unary<2>("rsqrt", [](auto x) { return kiln::rsqrt(x); }, s, 0.5, 3);
  unary<2>("abs", [](auto x) { return kiln::abs(x); }, s, -2, 2);
  unary<2>("tanh", [](auto x) { return kiln::tanh(x); }, s, -2, 2);
  unary<2>("sin", [](auto x) { return kiln::sin(x); }, s, -4, 4);
  unary<2>("cos", [](auto x) { return kiln::cos(x); }, s, -4, 4);
  unary<2>("sigmoid", [](auto x) { return kiln::sigmoid(x); }, s, -3, 3);
  unary<2>("relu", [](auto x) { return kiln::relu(x); }, s, -2, 2);
  unary<2>("gelu", [](auto x) { return kiln::gelu(x); }, s, -3, 3);
  unary<2>("gelu_tanh", [](auto x) { return kiln::gelu_tanh(x); }, s, -3, 3);
  unary<2>("square", [](auto x) { return kiln::square(x); }, s, -2, 2);
  unary<2>("silu", [](auto x) { return kiln::silu(x); }, s, -4, 4);
  unary<2>("softcap 1.5", [](auto x) { return kiln::softcap(x, 1.5); }, s, -4, 4);
  unary<2>("pow 3", [](auto x) { return kiln::pow(x, 3); }, s, -2, 2);
  unary<2>("pow 0.5", [](auto x) { return kiln::pow(x, 0.5); }, s, 0.5, 3);
  unary<2>("scalar arithmetic", [](auto x) { return 2 / (x * x + 1) - 3 * x; }, s, -2, 2);
}

inline void binary_rules() {
  using gradcheck::binary;
  const kiln::Shape m{3, 4}, row{4}, col{3, 1};
  binary<2, 2>("add", [](auto a, auto b) { return a + b; }, m, m, -2, 2);
  binary<2, 1>("sub, a row", [](auto a, auto b) { return a - b; }, m, row, -2, 2);
  binary<2, 2>("mul, a column", [](auto a, auto b) { return a * b; }, m, col, -2, 2);
  binary<2, 1>("div, a row", [](auto a, auto b) { return a / b; }, m, row, 0.5, 2);
  binary<2, 2>("maximum", [](auto a, auto b) { return kiln::maximum(a, b); }, m, m, -2, 2);
  binary<2, 1>("swiglu, up a row", [](auto a, auto b) { return kiln::swiglu(a, b); }, m, row, -3, 3);
  binary<2, 1>("minimum, a row", [](auto a, auto b) { return kiln::minimum(a, b); }, m, row, -2, 2);
  binary<2, 2>("where", [](auto a, auto b) { return kiln::where(a > b, a * b, b - a); }, m, m, -2, 2);
  binary<1, 2>("a row as the first operand", [](auto a, auto b) { return a * kiln::exp(b); }, row, m, -1, 1);
  binary<2, 0>("a rank-0 operand", [](auto a, auto b) { return kiln::tanh(a * b); }, m, kiln::Shape{}, -1, 1);
}

}  // namespace autodiff_pointwise_cases
