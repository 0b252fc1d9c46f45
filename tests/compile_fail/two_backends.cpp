// expect: give at most one backend
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile<kiln::Fused, kiln::Eager>(a + 1);
}
