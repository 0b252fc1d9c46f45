// One compiled object called from several threads: its calls are serialised by the object's
// lock, so every thread gets the results of its own input shapes, whatever the other threads
// bind and whichever plans they build or evict. Several objects called from several threads run
// in parallel. Built twice: as test_concurrency, and under ThreadSanitizer as
// test_concurrency_tsan.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include <kiln/kiln.hpp>

namespace {

constexpr auto x = kiln::input<"x", 2>();
constexpr auto w = kiln::param<"w", 2>();
constexpr auto b = kiln::param<"b", 1>();
// A GEMM with its epilogue and a row reduction: two kernel kinds, two outputs.
constexpr auto program = kiln::outputs(kiln::relu(kiln::matmul(x, w) + b), kiln::softmax(x));

struct Case {
  std::size_t m, k, n;
  kiln::Tensor<float> xt, wt, bt;
  std::vector<double> y, s;  // relu(x w + b) and softmax(x), in float64
};

Case make_case(std::size_t m, std::size_t k, std::size_t n, std::uint64_t seed) {
  Case c{m, k, n, kiln::randn<float>({m, k}, seed), kiln::randn<float>({k, n}, seed + 1), kiln::randn<float>({n}, seed + 2), {}, {}};
  c.y.resize(m * n);
  c.s.resize(m * k);
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double acc = c.bt[j];
      for (std::size_t kk = 0; kk < k; ++kk) acc += double(c.xt[i * k + kk]) * c.wt[kk * n + j];
      c.y[i * n + j] = std::max(acc, 0.0);
    }
    double mx = -1e300, sum = 0;
    for (std::size_t kk = 0; kk < k; ++kk) mx = std::max(mx, double(c.xt[i * k + kk]));
    for (std::size_t kk = 0; kk < k; ++kk) sum += std::exp(double(c.xt[i * k + kk]) - mx);
    for (std::size_t kk = 0; kk < k; ++kk) c.s[i * k + kk] = std::exp(double(c.xt[i * k + kk]) - mx) / sum;
  }
  return c;
}

bool close(const kiln::Tensor<float>& t, const std::vector<double>& want) {
  if (t.numel() != want.size()) return false;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(t[i] - want[i]) <= 1e-4 * (1 + std::abs(want[i])))) return false;
  return true;
}

// Two shapes per thread, sixteen in all: more than the eight plans a persistent policy keeps,
// so threads evict the plans of others while calling.
constexpr int kThreads = 8;
constexpr int kCalls = 100;
std::vector<Case> cases() {
  std::vector<Case> v;
  for (int c = 0; c < 2 * kThreads; ++c) v.push_back(make_case(24 + 4 * c, 64 + 8 * c, 32 + 4 * c, 100 + 10 * c));
  return v;
}

// Thread t calls f with its two shapes in turn; returns how many results were wrong.
template <class F>
int hammer(F& f, const std::vector<Case>& cs, int t) {
  int wrong = 0;
  for (int i = 0; i < kCalls; ++i) {
    const Case& c = cs[2 * t + i % 2];
    auto [y, s] = f(x = c.xt, w = c.wt, b = c.bt);
    wrong += !close(y, c.y) || !close(s, c.s);
  }
  return wrong;
}

template <class Policy>
void one_object_many_threads() {
  const std::vector<Case> cs = cases();
  auto f = kiln::compile<Policy>(program);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { wrong += hammer(f, cs, t); });
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
}

}  // namespace

TEST_CASE("one compiled object called from 8 threads with different shapes (ReduceOverhead: plans kept)") {
  one_object_many_threads<kiln::ReduceOverhead>();
}

TEST_CASE("one compiled object called from 8 threads with different shapes (Default: one plan)") {
  one_object_many_threads<kiln::Default>();
}

TEST_CASE("one object per thread: 8 objects in parallel") {
  const std::vector<Case> cs = cases();
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto f = kiln::compile<kiln::ReduceOverhead>(program);
      wrong += hammer(f, cs, t);
    });
  for (auto& th : threads) th.join();
  CHECK(wrong.load() == 0);
}

TEST_CASE("a compiled object moved after calls still runs") {
  const std::vector<Case> cs = cases();
  auto f = kiln::compile<kiln::ReduceOverhead>(program);
  CHECK(hammer(f, cs, 0) == 0);
  auto g = std::move(f);
  CHECK(hammer(g, cs, 1) == 0);
}
