// expect: an integer tensor \(kiln::i32, kiln::i64\) is an index
#include <kiln/kiln.hpp>
int main() {
  constexpr auto ids = kiln::input<"ids", 1, kiln::i64>();
  constexpr auto y = ids + 1;
}
