// expect: binds a symbol that the compiled expression does not use
#include <kiln/kiln.hpp>
int main() {
  constexpr auto x = kiln::input<"x", 1>();
  constexpr auto z = kiln::input<"z", 1>();
  auto id = [](const kiln::Tensor<float>& t) { return t; };
  auto f = kiln::compile(kiln::host(id, x) + 1.0f);
  kiln::Tensor<float> a({3});
  f(x = a, z = a);
}
