// expect: kiln: bind inputs by symbol: f.x = xt, w = wt, ...., where x and w are
#include <kiln/kiln.hpp>
int main() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  auto f = kiln::compile(kiln::matmul(x, w));
  auto xt = kiln::randn<float>({2, 3}, 1), wt = kiln::randn<float>({3, 4}, 2);
  auto y = f(xt, wt);  // a positional call: one static_assert saying how to bind
  (void)y;
}
