// expect: kiln::matmul: the left operand must have rank 2
#include <kiln/kiln.hpp>
int main() {
  constexpr auto v = kiln::input<"v", 1>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto y = kiln::matmul(v, w);
}
