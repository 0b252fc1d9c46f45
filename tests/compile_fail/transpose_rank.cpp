// expect: kiln::transpose swaps the last two axes, so its operand needs rank >= 2
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 1>();
  constexpr auto y = kiln::transpose(a);
}
