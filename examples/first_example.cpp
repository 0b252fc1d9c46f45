// The README's first example, built so that the README stays true.
#include <kiln/kiln.hpp>

#include <cstdio>

constexpr auto x = kiln::input<"x", 2>();   // name, rank; element type float by default
constexpr auto w = kiln::param<"w", 2>();
constexpr auto b = kiln::param<"b", 1>();
constexpr auto y = kiln::gelu(kiln::matmul(x, w) + b);

int main() {
  auto xt = kiln::randn<float>({64, 768}, /*seed=*/1);
  auto wt = kiln::randn<float>({768, 3072}, 2);
  auto bt = kiln::randn<float>({3072}, 3);

  auto f = kiln::compile(y);                   // one GEMM kernel, bias + GELU in its epilogue
  kiln::Tensor<float> out = f(x = xt, w = wt, b = bt);   // bind by symbol, any order
  std::puts(f.explain().c_str());              // the plan
}
