// kiln quickstart: three of the reference workloads (docs/benchmarks.md) written as expressions,
// compiled, checked against the eager baseline, with their plans and eager/compiled times.
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

namespace {

// Median wall time of `runs` calls, in milliseconds.
template <class F>
double median_ms(F&& f, int runs = 7) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The largest |a - b| / (atol + rtol |b|): at most 1 means a matches b.
double mismatch(const kiln::Tensor<float>& a, const kiln::Tensor<float>& b, double rtol = 1e-4, double atol = 1e-5) {
  double m = 0;
  for (std::size_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::abs(double(a[i]) - b[i]) / (atol + rtol * std::abs(double(b[i]))));
  return m;
}

template <class Compiled, class Eager, class... Bindings>
bool report(const char* name, Compiled& f, Eager& e, const Bindings&... bs) {
  std::printf("== %s\n%s", name, f.explain().c_str());
  const kiln::Tensor<float> got = f(bs...), want = e(bs...);
  const double diff = mismatch(got, want);
  const double te = median_ms([&] { e(bs...); }), tc = median_ms([&] { f(bs...); });
  std::printf("compiled vs eager: largest difference %.2f of the tolerance (1e-5 + 1e-4 |eager|); eager %.3f ms, compiled %.3f ms (%.2fx)\n\n", diff,
              te, tc, te / tc);
  return diff <= 1.0;
}

}  // namespace

int main() {
  bool ok = true;
  {  // W1: a pointwise chain, one kernel.
    constexpr auto x = kiln::input<"x", 1>();
    constexpr auto y = kiln::gelu(x * 1.5f + 0.5f) * kiln::sigmoid(x) + kiln::tanh(x);
    auto f = kiln::compile(y);
    auto e = kiln::eager(y);
    const auto xt = kiln::randn<float>({std::size_t{1} << 24}, 1);
    ok &= report("W1 pointwise chain, n = 2^24", f, e, x = xt);
  }
  {  // W2: add + layer_norm, one row kernel.
    constexpr auto x = kiln::input<"x", 2>();
    constexpr auto r = kiln::input<"r", 2>();
    constexpr auto g = kiln::param<"gamma", 1>();
    constexpr auto b = kiln::param<"beta", 1>();
    constexpr auto y = kiln::layer_norm(x + r, g, b, 1e-5);
    auto f = kiln::compile(y);
    auto e = kiln::eager(y);
    const auto xt = kiln::randn<float>({4096, 768}, 2), rt = kiln::randn<float>({4096, 768}, 3);
    const auto gt = kiln::randn<float>({768}, 4), bt = kiln::randn<float>({768}, 5);
    ok &= report("W2 add + layer_norm, [4096, 768]", f, e, x = xt, r = rt, g = gt, b = bt);
  }
  {  // W4: a transformer FFN, two GEMM kernels with their epilogues.
    constexpr auto x = kiln::input<"x", 2>();
    constexpr auto w1 = kiln::param<"w1", 2>();
    constexpr auto b1 = kiln::param<"b1", 1>();
    constexpr auto w2 = kiln::param<"w2", 2>();
    constexpr auto b2 = kiln::param<"b2", 1>();
    constexpr auto y = kiln::matmul(kiln::gelu(kiln::matmul(x, w1) + b1), w2) + b2;
    auto f = kiln::compile(y);
    auto e = kiln::eager(y);
    const auto xt = kiln::randn<float>({256, 768}, 6);
    auto w1t = kiln::randn<float>({768, 3072}, 7), w2t = kiln::randn<float>({3072, 768}, 8);
    for (std::size_t i = 0; i < w1t.numel(); ++i) w1t[i] *= 0.036f;  // ~ 1/sqrt(768)
    for (std::size_t i = 0; i < w2t.numel(); ++i) w2t[i] *= 0.018f;  // ~ 1/sqrt(3072)
    const auto b1t = kiln::randn<float>({3072}, 9), b2t = kiln::randn<float>({768}, 10);
    ok &= report("W4 transformer FFN, B = 256", f, e, x = xt, w1 = w1t, b1 = b1t, w2 = w2t, b2 = b2t);
  }
  std::printf(ok ? "quickstart: compiled matches eager on W1, W2, W4\n" : "quickstart: MISMATCH\n");
  return ok ? 0 : 1;
}
