// expect: two symbols in this expression share a name
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto a1 = kiln::input<"a", 1>();
  auto f = kiln::compile(a + a1);
}
