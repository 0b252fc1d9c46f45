// expect: this op does not compute on integer tensors \(kiln::i32, kiln::i64\)
#include <kiln/kiln.hpp>
int main() {
  constexpr auto ids = kiln::input<"ids", 1, kiln::i64>();
  constexpr auto y = ids / 2;
}
