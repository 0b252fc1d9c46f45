// What one call promises, beyond its values:
// - a repeated call of a persistent policy into tensors the caller owns allocates nothing, so no
//   allocation can fail once a kernel has written an output or an assigned parameter (16-bit
//   GEMM operands are widened into scratch reserved with the plan; sum_to sums a 16-bit output
//   in float scratch reserved the same way);
// - under MaxAutotune, an autotune cache entry that is a FIFO, a device, a huge file or garbage
//   neither fails nor stalls a call: it is ignored with a warning and rewritten, and a parameter
//   updated by kiln::assign is updated exactly once.
// The replaced operator new and delete below are malloc and free; GCC, inlining them into the
// library's allocators, reports each pair as mismatched.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <kiln/kiln.hpp>

#include "scoped_cache_dir.hpp"

namespace fs = std::filesystem;

// Every allocation of the process while counting is on: operator new, and (glibc) malloc, which
// Eigen's matrices use.
namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
inline void note_allocation() {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

void* operator new(std::size_t n) {
  note_allocation();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new(std::size_t n, std::align_val_t a) {
  note_allocation();
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(al, (std::max<std::size_t>(n, 1) + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

#if defined(__GLIBC__)
extern "C" void* __libc_malloc(std::size_t);
extern "C" void* __libc_calloc(std::size_t, std::size_t);
extern "C" void* __libc_realloc(void*, std::size_t);
extern "C" void* malloc(std::size_t n) noexcept {
  note_allocation();
  return __libc_malloc(n);
}
extern "C" void* calloc(std::size_t n, std::size_t s) noexcept {
  note_allocation();
  return __libc_calloc(n, s);
}
extern "C" void* realloc(void* p, std::size_t n) noexcept {
  note_allocation();
  return __libc_realloc(p, n);
}
#endif

namespace {

double bf(kiln::bf16 v) { return static_cast<float>(v); }

}  // namespace

TEST_CASE("a repeated ReduceOverhead call with a bf16 matmul and a sum_to allocates nothing") {
  constexpr auto x = kiln::input<"x", 2, kiln::bf16>();
  constexpr auto w = kiln::param<"w", 2, kiln::bf16>();
  constexpr auto b = kiln::param<"b", 1, kiln::bf16>();
  constexpr auto c = kiln::input<"c", 1, kiln::bf16>();
  auto f = kiln::compile<kiln::ReduceOverhead>(kiln::outputs(kiln::matmul(x, w) + b, kiln::sum_to(x * 2.0f, c)));
  const std::size_t m = 37, k = 300, n = 45;  // sum_to over 37 rows of 300 columns: two column tasks
  const auto xt = kiln::randn<float>({m, k}, 1).as<kiln::bf16>();
  const auto wt = kiln::randn<float>({k, n}, 2).as<kiln::bf16>();
  const auto bt = kiln::randn<float>({n}, 3).as<kiln::bf16>();
  const kiln::Tensor<kiln::bf16> ct({k});
  kiln::Tensor<kiln::bf16> y({m, n}), s({k});
  f.into(std::tie(y, s), x = xt, w = wt, b = bt, c = ct);  // plans, reserves every workspace
  for (int rep = 0; rep < 3; ++rep) {
    y.fill(kiln::bf16(0.0f));
    s.fill(kiln::bf16(0.0f));
    g_allocations = 0;
    g_counting = true;
    f.into(std::tie(y, s), x = xt, w = wt, b = bt, c = ct);
    g_counting = false;
    CHECK(g_allocations.load() == 0);
  }
  // The values, against float64 (bf16 operands exact in double; one rounding of the product, one
  // of the bias add, one of the sum).
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::size_t kk = 0; kk < k; ++kk) acc += bf(xt[i * k + kk]) * bf(wt[kk * n + j]);
      acc += bf(bt[j]);
      REQUIRE(bf(y[i * n + j]) == doctest::Approx(acc).epsilon(2e-2).scale(1.0));
    }
  for (std::size_t kk = 0; kk < k; ++kk) {
    double acc = 0;
    for (std::size_t i = 0; i < m; ++i) acc += 2.0 * bf(xt[i * k + kk]);
    REQUIRE(bf(s[kk]) == doctest::Approx(acc).epsilon(1e-2).scale(1.0));
  }
}

namespace {

// Ends the process if a call takes longer than the limit: a call blocked on a FIFO would
// otherwise hang the test run.
class Watchdog {
 public:
  explicit Watchdog(const char* what, std::chrono::seconds limit = std::chrono::seconds(60))
      : thread_([this, what, limit] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
            std::fprintf(stderr, "call_safety: %s: the call did not return within %llds\n", what,
                         static_cast<long long>(limit.count()));
            std::_Exit(3);
          }
        }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

constexpr auto ax = kiln::input<"x", 2>();
constexpr auto av = kiln::param<"v", 2>();
constexpr auto aw = kiln::param<"w", 1>();
// The in-place update of w first, then two tuned kernels: a cache read that threw or blocked
// during the call would do so after w was written.
constexpr auto tuned_program =
    kiln::outputs(kiln::assign(aw, aw * 0.5f + 1.0f), kiln::softmax(ax), kiln::relu(kiln::matmul(ax, av)));

enum class Poison { Fifo, DevZero, Huge, Garbage, ForeignConfig };

// An entry as kiln writes it (its key kept, a valid checksum) whose configuration no kernel
// offers: a thread count past any machine's, negative chunks, an unknown GEMM variant.
void write_foreign_config(const fs::path& p) {
  std::string text, key;
  {
    std::ifstream in(p);
    std::getline(in, text);  // magic and version
    std::getline(in, key);   // "key <the key>"
  }
  REQUIRE(key.rfind("key ", 0) == 0);
  const std::string body = kiln::runtime::encode_body(key.substr(4), {{1000000, -3, 77, -5}, 1.0});
  std::ofstream(p) << body << "check " << kiln::runtime::hex(kiln::fnv1a(body)) << '\n';
}

// Fills a fresh cache with one tuning run, replaces every entry by `poison`, then calls a fresh
// object: the call must return promptly with the right values, update w once, and rewrite each
// entry as a small regular file.
void bad_cache_entries(Poison poison, const char* what) {
  test_support::ScopedCacheDir scoped(std::string("call-safety-") + what);
  const fs::path dir = std::getenv("KILN_CACHE_DIR");
  const std::size_t m = 24, k = 40, n = 30;
  const auto xt = kiln::randn<float>({m, k}, 4), vt = kiln::randn<float>({k, n}, 5);
  kiln::Tensor<float> wt({n});
  {
    auto f = kiln::compile<kiln::MaxAutotune>(tuned_program);
    wt.fill(1.0f);
    f(ax = xt, av = vt, aw = wt);
    REQUIRE(f.autotune_stats().tuned >= 2);
  }
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(dir)) entries.push_back(e.path());
  REQUIRE(entries.size() >= 2);
  for (const auto& p : entries) {
    if (poison == Poison::ForeignConfig) {
      write_foreign_config(p);
      continue;
    }
    fs::remove(p);
    switch (poison) {
      case Poison::Fifo: REQUIRE(::mkfifo(p.c_str(), 0600) == 0); break;
      case Poison::DevZero: fs::create_symlink("/dev/zero", p); break;
      case Poison::Huge:
        std::ofstream(p).put('x');
        fs::resize_file(p, std::uintmax_t{2} << 30);  // sparse: no disk blocks
        break;
      case Poison::Garbage: std::ofstream(p) << "kiln-autotune 4\nkey \x01\x02 garbage\n"; break;
      case Poison::ForeignConfig: break;
    }
  }
  auto f = kiln::compile<kiln::MaxAutotune>(tuned_program);
  wt.fill(1.0f);
  std::tuple<kiln::Tensor<float>, kiln::Tensor<float>> out;
  const auto t0 = std::chrono::steady_clock::now();
  {
    Watchdog watchdog(what);
    CHECK_NOTHROW(out = f(ax = xt, av = vt, aw = wt));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(seconds < 10);
  for (std::size_t j = 0; j < n; ++j) CHECK(wt[j] == 1.5f);  // 1.75 if updated twice, 1 if never
  const auto& [s, y] = out;
  REQUIRE(s.numel() == m * k);
  REQUIRE(y.numel() == m * n);
  for (std::size_t i = 0; i < m; ++i) {
    double mx = -1e300, sum = 0;
    for (std::size_t kk = 0; kk < k; ++kk) mx = std::max(mx, double(xt[i * k + kk]));
    for (std::size_t kk = 0; kk < k; ++kk) sum += std::exp(double(xt[i * k + kk]) - mx);
    for (std::size_t kk = 0; kk < k; ++kk)
      CHECK(s[i * k + kk] == doctest::Approx(std::exp(double(xt[i * k + kk]) - mx) / sum).epsilon(1e-5));
    for (std::size_t j = 0; j < n; ++j) {
      double acc = 0;
      for (std::size_t kk = 0; kk < k; ++kk) acc += double(xt[i * k + kk]) * vt[kk * n + j];
      CHECK(y[i * n + j] == doctest::Approx(std::max(acc, 0.0)).epsilon(1e-4).scale(1.0));
    }
  }
  CHECK(f.autotune_stats().from_cache == 0);
  CHECK(f.explain().find("assigned in place, without a copy: w (kernel 0)") != std::string::npos);
  for (const auto& p : entries) {
    INFO(p.string());
    CHECK(fs::is_regular_file(fs::symlink_status(p)));
    CHECK(fs::file_size(p) < 4096);
  }
  // The rewritten entries are read back by the next object.
  auto g = kiln::compile<kiln::MaxAutotune>(tuned_program);
  g(ax = xt, av = vt, aw = wt);
  CHECK(g.autotune_stats().tuned == 0);
  CHECK(g.autotune_stats().from_cache == f.autotune_stats().tuned);
}

}  // namespace

TEST_CASE("a garbage autotune cache entry is ignored and rewritten") { bad_cache_entries(Poison::Garbage, "garbage"); }
TEST_CASE("an autotune cache entry linked to /dev/zero is ignored and rewritten") { bad_cache_entries(Poison::DevZero, "devzero"); }
TEST_CASE("a 2 GiB sparse autotune cache entry is ignored promptly and rewritten") { bad_cache_entries(Poison::Huge, "huge"); }
TEST_CASE("an autotune cache entry that is a FIFO does not block the call") { bad_cache_entries(Poison::Fifo, "fifo"); }
TEST_CASE("an autotune cache entry with a configuration the kernel does not offer is ignored and rewritten") {
  bad_cache_entries(Poison::ForeignConfig, "foreign");
}
