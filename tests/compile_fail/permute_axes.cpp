// expect: kiln::permute: the axes must be a permutation of 0 .. rank-1
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 3>();
  constexpr auto y = kiln::permute<0, 2, 2>(a);
  (void)y;
}
