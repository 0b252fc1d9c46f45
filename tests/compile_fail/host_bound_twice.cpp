// expect: this call binds one symbol twice
#include <kiln/kiln.hpp>
int main() {
  constexpr auto x = kiln::input<"x", 1>();
  auto id = [](const kiln::Tensor<float>& t) { return t; };
  auto f = kiln::compile(kiln::host(id, x) + 1.0f);
  kiln::Tensor<float> a({3});
  f(x = a, x = a);
}
