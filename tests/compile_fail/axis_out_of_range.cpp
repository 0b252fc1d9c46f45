// expect: the reduction axis is out of range
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 2>();
  constexpr auto y = kiln::sum<2>(a);
}
