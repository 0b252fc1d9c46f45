// expect: two kiln::assign outputs target one symbol; assign each symbol once
#include <kiln/kiln.hpp>
int main() {
  constexpr auto w = kiln::param<"w", 1>();
  auto f = kiln::compile(kiln::outputs(kiln::assign(w, w * 2.0f), kiln::assign(w, w + 1.0f)));
  kiln::Tensor<float> t({3});
  f(w = t);
}
