// expect: an integer input \(kiln::i32, kiln::i64\) has no gradient
#include <kiln/kiln.hpp>
int main() {
  constexpr auto ids = kiln::input<"ids", 1, kiln::i64>();
  constexpr auto table = kiln::param<"table", 2>();
  constexpr auto g = kiln::grad(kiln::sum(kiln::embedding(ids, table)), ids);
}
