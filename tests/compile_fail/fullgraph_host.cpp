// expect: kiln::FullGraph: this expression contains kiln::host, a graph break
#include <kiln/kiln.hpp>
int main() {
  constexpr auto x = kiln::input<"x", 1>();
  auto id = [](const kiln::Tensor<float>& t) { return t; };
  auto f = kiln::compile<kiln::FullGraph>(kiln::host(id, x) * 2.0f);
}
