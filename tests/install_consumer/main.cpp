// Built against an installed kiln: compiles a fused kernel and checks one value.
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>

int main() {
  constexpr auto x = kiln::input<"x", 1>();
  auto f = kiln::compile(kiln::exp(x) * 2.0f);
  kiln::Tensor<float> xt({3});
  xt[0] = 0.0f;
  xt[1] = 1.0f;
  xt[2] = -1.0f;
  const auto y = f(x = xt);
  const bool ok = std::abs(y[1] - 2.0f * std::exp(1.0f)) < 1e-5f && y[0] == 2.0f && f.kernel_count() == 1;
  std::puts(ok ? "consumer: ok" : "consumer: wrong result");
  return ok ? 0 : 1;
}
