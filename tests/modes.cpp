// Modes and backends as policy types: every combination computes the same values; into()
// writes caller-owned outputs; ReduceOverhead allocates nothing on a repeated call.
// Replacing the global allocation functions pairs malloc with free by design.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <atomic>
#include <cstdlib>
#include <new>

#include "reference.hpp"
#include "scoped_cache_dir.hpp"

// Counts every allocation in this test binary (replaces the global operator new).
namespace {
std::atomic<long> g_allocations{0};
}
void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  ++g_allocations;
  const std::size_t align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (std::max<std::size_t>(n, 1) + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {

constexpr auto x = kiln::input<"x", 2>();
constexpr auto w = kiln::param<"w", 2>();
constexpr auto b = kiln::param<"b", 1>();
// Every kernel kind: a GEMM with an epilogue, a row reduction (softmax), an axis reduction
// and a total reduction.
constexpr auto h = kiln::gelu(kiln::matmul(x, w) + b);
constexpr auto program = kiln::outputs(kiln::softmax(h), kiln::sum<0>(h * h), kiln::max(h));

struct Data {
  kiln::Tensor<float> xt, wt, bt;
  ref::Array sm, colsum, mx;
  explicit Data(std::size_t m) : xt(kiln::randn<float>({m, 40}, 1)), wt(kiln::randn<float>({40, 24}, 2)), bt(kiln::randn<float>({24}, 3)) {
    const auto hh = ref::map(ref::zip(ref::matmul(ref::from(xt), ref::from(wt)), ref::from(bt), [](double p, double q) { return p + q; }), ref::gelu);
    sm = ref::softmax(hh);
    colsum = ref::reduce(ref::map(hh, [](double v) { return v * v; }), 0, ref::Red::Sum, false);
    mx = ref::reduce_all(hh, ref::Red::Max);
  }
};

template <class F>
void check_program(F& f, const Data& d) {
  auto [s, c, m] = f(x = d.xt, w = d.wt, b = d.bt);
  ref::check_close(s, d.sm, 1e-4, 1e-6);
  ref::check_close(c, d.colsum, 1e-4, 1e-4);
  ref::check_close(m, d.mx, 1e-4, 1e-5);
}

}  // namespace

TEST_CASE_TEMPLATE("every policy computes the same values", P, kiln::Default, kiln::ReduceOverhead,
                   kiln::MaxAutotune, kiln::MaxAutotuneNoCudaGraphs, kiln::Fused, kiln::CudaGraphs, kiln::Eager,
                   kiln::FullGraph) {
  // A fresh autotune cache per process: tests that ctest runs in parallel never share one.
  const test_support::ScopedCacheDir cache("modes");
  CHECK(kiln::runtime::cache_dir().filename().string() == "kiln-modes-" + std::to_string(::getpid()));
  auto f = kiln::compile<P>(program);
  const Data d(33);
  check_program(f, d);
  check_program(f, d);
  const Data d2(7);  // a second shape signature
  check_program(f, d2);
  check_program(f, d);
}

TEST_CASE("policies compose in any order") {
  auto a = kiln::compile<kiln::MaxAutotune, kiln::FullGraph>(h);
  auto b2 = kiln::compile<kiln::FullGraph, kiln::Eager, kiln::ReduceOverhead>(h);
  CHECK(a.kernel_count() == 1);
  CHECK(b2.kernel_count() == 3);  // matmul, add, gelu: nothing fused
  CHECK(kiln::compile<kiln::CudaGraphs>(h).kernel_count() == 3);
  CHECK(a.explain().find("fused, MaxAutotune, Fused") != std::string::npos);
  CHECK(b2.explain().find("unfused, ReduceOverhead, Eager") != std::string::npos);
}

TEST_CASE("into writes caller-owned outputs and checks them") {
  auto f = kiln::compile<kiln::ReduceOverhead>(program);
  const Data d(20);
  kiln::Tensor<float> s({20, 24}), c({24}), m(kiln::Shape{});
  f.into(std::tie(s, c, m), x = d.xt, w = d.wt, b = d.bt);
  ref::check_close(s, d.sm, 1e-4, 1e-6);
  ref::check_close(c, d.colsum, 1e-4, 1e-4);
  ref::check_close(m, d.mx, 1e-4, 1e-5);

  kiln::Tensor<float> wrong({21, 24});
  wrong.fill(7.0f);
  CHECK_THROWS_WITH_AS(f.into(std::tie(wrong, c, m), x = d.xt, w = d.wt, b = d.bt),
                       "into: output 0 has shape [21, 24], the expression gives [20, 24]", kiln::ShapeError);
  CHECK(wrong[0] == 7.0f);  // nothing written

  auto g = kiln::compile(x * 2.0f);
  kiln::Tensor<float> xt = kiln::randn<float>({3, 4}, 5);
  CHECK_THROWS_AS(g.into(xt, x = xt), kiln::BindingError);
  kiln::Tensor<float> y({3, 4});
  g.into(y, x = xt);
  for (std::size_t i = 0; i < y.numel(); ++i) CHECK(y[i] == 2.0f * xt[i]);
}

TEST_CASE("ReduceOverhead: a repeated call allocates nothing, for each cached shape") {
  auto f = kiln::compile<kiln::ReduceOverhead>(program);
  const Data d(64), d2(9);
  kiln::Tensor<float> s({64, 24}), c({24}), m(kiln::Shape{}), s2({9, 24});
  f.into(std::tie(s, c, m), x = d.xt, w = d.wt, b = d.bt);     // plans shape 1
  f.into(std::tie(s2, c, m), x = d2.xt, w = d2.wt, b = d2.bt);  // plans shape 2
  const long before = g_allocations.load();
  f.into(std::tie(s, c, m), x = d.xt, w = d.wt, b = d.bt);
  f.into(std::tie(s2, c, m), x = d2.xt, w = d2.wt, b = d2.bt);
  const long allocations = g_allocations.load() - before;
  CHECK(allocations == 0);
  ref::check_close(s2, d2.sm, 1e-4, 1e-6);
  f.into(std::tie(s, c, m), x = d.xt, w = d.wt, b = d.bt);
  ref::check_close(s, d.sm, 1e-4, 1e-6);
  ref::check_close(c, d.colsum, 1e-4, 1e-4);
}

TEST_CASE("Default allocates per call, ReduceOverhead keeps its arena") {
  auto f = kiln::compile(program);
  const Data d(64);
  kiln::Tensor<float> s({64, 24}), c({24}), m(kiln::Shape{});
  f.into(std::tie(s, c, m), x = d.xt, w = d.wt, b = d.bt);
  const long before = g_allocations.load();
  f.into(std::tie(s, c, m), x = d.xt, w = d.wt, b = d.bt);
  CHECK(g_allocations.load() - before > 0);  // the arena for this call
}

TEST_CASE("explain reports traffic and operation counts after a call") {
  auto f = kiln::compile(kiln::gelu(kiln::matmul(x, w) + b));
  CHECK(f.explain().find("Mop") == std::string::npos);  // no call yet: no shapes
  const Data d(16);
  f(x = d.xt, w = d.wt, b = d.bt);
  const std::string e = f.explain();
  CHECK(e.find("for input shapes x [16, 40], w [40, 24], b [24]:") != std::string::npos);
  // 2 * 16 * 24 * 40 multiply-adds plus 2 epilogue ops (add, gelu) per element.
  CHECK(e.find("0.0315 Mop") != std::string::npos);
}

TEST_CASE("profile() times each kernel of every call and explain() shows it") {
  constexpr auto a = kiln::input<"a", 2>();
  auto f = kiln::compile<kiln::ReduceOverhead>(kiln::softmax(a * 2.0f) + kiln::sum<-1, true>(a));
  const auto at = kiln::randn<float>({64, 300}, 3);
  f(a = at);
  CHECK(f.explain().find("ms per call") == std::string::npos);  // off by default
  f.profile();
  for (int i = 0; i < 3; ++i) f(a = at);
  const std::string on = f.explain();
  CHECK(on.find("kernel 0: reads") != std::string::npos);
  CHECK(on.find("ms per call (") != std::string::npos);
  CHECK(on.find("GB/s") != std::string::npos);
  f.profile(false);
  f(a = at);
  CHECK(f.explain() == on);  // figures kept, no longer updated
}
