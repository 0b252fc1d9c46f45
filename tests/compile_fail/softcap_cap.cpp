// expect: kiln::softcap: the cap c must be positive and finite
#include <kiln/kiln.hpp>
int main() {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto y = kiln::softcap(x, 0.0);
  (void)y;
}
