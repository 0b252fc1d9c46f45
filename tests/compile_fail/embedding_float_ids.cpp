// expect: ids must be integers: declare them kiln::input<"ids", R, kiln::i64>\(\)
#include <kiln/kiln.hpp>
int main() {
  constexpr auto ids = kiln::input<"ids", 1>();
  constexpr auto table = kiln::param<"table", 2>();
  constexpr auto y = kiln::embedding(ids, table);
}
