// expect: kiln::full: the element type must be float, double, kiln::bf16 or kiln::f16 \(or an index type
#include <kiln/kiln.hpp>
int main() {
  auto t = kiln::full({2, 3}, 1);
}
