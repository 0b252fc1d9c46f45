// expect: operands of a pointwise op have different element types
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 1>();
  constexpr auto b = kiln::input<"b", 1, double>();
  constexpr auto y = a + b;
}
