// Reverse mode: binary pointwise rules, with broadcasting, against central finite differences in float64.
#include "gradcheck.hpp"

using namespace gradcheck;

TEST_CASE("binary pointwise rules, with broadcasting") {
  const kiln::Shape m{3, 4}, row{4}, col{3, 1};
  binary<2, 2>("add", [](auto a, auto b) { return a + b; }, m, m, -2, 2);
  binary<2, 1>("sub, a row", [](auto a, auto b) { return a - b; }, m, row, -2, 2);
  binary<2, 2>("mul, a column", [](auto a, auto b) { return a * b; }, m, col, -2, 2);
  binary<2, 1>("div, a row", [](auto a, auto b) { return a / b; }, m, row, 0.5, 2);
  binary<2, 2>("maximum", [](auto a, auto b) { return kiln::maximum(a, b); }, m, m, -2, 2);
  binary<2, 1>("minimum, a row", [](auto a, auto b) { return kiln::minimum(a, b); }, m, row, -2, 2);
  binary<2, 2>("where", [](auto a, auto b) { return kiln::where(a > b, a * b, b - a); }, m, m, -2, 2);
  binary<1, 2>("a row as the first operand", [](auto a, auto b) { return a * kiln::exp(b); }, row, m, -1, 1);
  binary<2, 0>("a rank-0 operand", [](auto a, auto b) { return kiln::tanh(a * b); }, m, kiln::Shape{}, -1, 1);
}

