// A separate process for tests/autotune.cpp: compiles W4-like work under MaxAutotune with
// the cache folder given in KILN_CACHE_DIR, runs it, checks it against eager, and prints
// "tuned=N cached=M".
#include <kiln/kiln.hpp>

#include <cmath>
#include <cstdio>

int main() {
  constexpr auto x = kiln::input<"x", 2>();
  constexpr auto w = kiln::param<"w", 2>();
  constexpr auto b = kiln::param<"b", 1>();
  constexpr auto y = kiln::outputs(kiln::gelu(kiln::matmul(x, w) + b), kiln::softmax(x));
  auto f = kiln::compile<kiln::MaxAutotune>(y);
  auto e = kiln::eager(y);
  const auto xt = kiln::randn<float>({48, 64}, 1), wt = kiln::randn<float>({64, 80}, 2), bt = kiln::randn<float>({80}, 3);
  auto [p, q] = f(x = xt, w = wt, b = bt);
  auto [p2, q2] = e(x = xt, w = wt, b = bt);
  bool same = true;
  for (std::size_t i = 0; i < p.numel(); ++i) same = same && std::abs(p[i] - p2[i]) <= 1e-4f * (1 + std::abs(p2[i]));
  for (std::size_t i = 0; i < q.numel(); ++i) same = same && std::abs(q[i] - q2[i]) <= 1e-6f;
  std::printf("tuned=%d cached=%d %s\n", f.autotune_stats().tuned, f.autotune_stats().from_cache, same ? "same" : "DIFFERENT");
  return same ? 0 : 1;
}
