// expect: this call leaves a symbol unbound
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 1>();
  constexpr auto b = kiln::input<"b", 1>();
  auto f = kiln::compile(a + b);
  kiln::Tensor<float> t({3});
  f(a = t);
}
