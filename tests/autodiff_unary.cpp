// Reverse mode: unary pointwise rules, against central finite differences in float64.
#include "gradcheck.hpp"

using namespace gradcheck;

TEST_CASE("unary pointwise rules") {
  const kiln::Shape s{3, 5};
  unary<2>("neg", [](auto x) { return -x; }, s, -2, 2);
  unary<2>("exp", [](auto x) { return kiln::exp(x); }, s, -2, 2);
  unary<2>("log", [](auto x) { return kiln::log(x); }, s, 0.5, 3);
  unary<2>("sqrt", [](auto x) { return kiln::sqrt(x); }, s, 0.5, 3);
  unary<2>("rsqrt", [](auto x) { return kiln::rsqrt(x); }, s, 0.5, 3);
  unary<2>("abs", [](auto x) { return kiln::abs(x); }, s, -2, 2);
  unary<2>("tanh", [](auto x) { return kiln::tanh(x); }, s, -2, 2);
  unary<2>("sigmoid", [](auto x) { return kiln::sigmoid(x); }, s, -3, 3);
  unary<2>("relu", [](auto x) { return kiln::relu(x); }, s, -2, 2);
  unary<2>("gelu", [](auto x) { return kiln::gelu(x); }, s, -3, 3);
  unary<2>("gelu_tanh", [](auto x) { return kiln::gelu_tanh(x); }, s, -3, 3);
  unary<2>("square", [](auto x) { return kiln::square(x); }, s, -2, 2);
  unary<2>("pow 3", [](auto x) { return kiln::pow(x, 3); }, s, -2, 2);
  unary<2>("pow 0.5", [](auto x) { return kiln::pow(x, 0.5); }, s, 0.5, 3);
  unary<2>("scalar arithmetic", [](auto x) { return 2 / (x * x + 1) - 3 * x; }, s, -2, 2);
}

