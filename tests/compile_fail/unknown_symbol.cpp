// expect: binds a symbol that the compiled expression does not use
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 1>();
  constexpr auto z = kiln::input<"z", 1>();
  auto f = kiln::compile(a * 2);
  kiln::Tensor<float> t({3});
  f(a = t, z = t);
}
