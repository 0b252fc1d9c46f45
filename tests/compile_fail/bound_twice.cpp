// expect: this call binds one symbol twice
#include <kiln/kiln.hpp>
int main() {
  constexpr auto a = kiln::input<"a", 1>();
  auto f = kiln::compile(a * 2);
  kiln::Tensor<float> t({3});
  f(a = t, a = t);
}
