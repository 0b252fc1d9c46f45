// expect: the tensor bound to this symbol has a different element type
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 1>();
  auto f = kiln::compile(a * 2);
  kiln::Tensor<double> t({3});
  f(a = t);
}
