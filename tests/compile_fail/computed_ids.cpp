// expect: ids must be an input
#include <kiln/kiln.hpp>
int main() {
  constexpr auto ids = kiln::input<"ids", 1, kiln::i64>();
  constexpr auto table = kiln::param<"table", 2>();
  constexpr auto y = kiln::embedding(ids + 1, table);
}
