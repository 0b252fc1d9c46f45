// kiln's differential fuzzer: KILN_FUZZ_PROGRAMS programs of KILN_FUZZ_GRAPHS graphs each, from
// program KILN_FUZZ_FIRST on (compile definitions, so a sweep is several of these executables
// built in parallel), each checked in every mode and backend against float64 (differential.hpp).
// With KILN_FUZZ_REGRESSIONS, the saved regression graphs (regressions.inc) too.
// With KILN_FUZZ_MINIMISE=<program> instead, that program's graph is minimised: each of its
// subtrees is checked alone, and the smallest that fails is printed as a regression line.
// Prints what failed and a summary; exits 1 on any mismatch. --gpu runs them on the GPU (in a
// build with the CUDA kernels; exit code 77, skipped, where there is no GPU); --list prints the
// programs' graphs and runs nothing.
// The float64 reference (tests/reference.hpp) comes with doctest's macros; this program has no
// test cases of its own.
#define DOCTEST_CONFIG_DISABLE
#include <cstring>
#include <utility>

#include "../scoped_cache_dir.hpp"
#include "differential.hpp"
#if KILN_CUDA_KERNELS
#include <kiln/backend/cuda/runtime.hpp>
#endif

#ifndef KILN_FUZZ_FIRST
#define KILN_FUZZ_FIRST 0
#endif
#ifndef KILN_FUZZ_PROGRAMS
#define KILN_FUZZ_PROGRAMS 2
#endif
#ifndef KILN_FUZZ_GRAPHS
#define KILN_FUZZ_GRAPHS 1
#endif

namespace fuzz {
namespace {
constexpr std::uint64_t program_seed(std::uint64_t i) { return mix(0x6b696c6eull + i) * KILN_FUZZ_GRAPHS; }
template <std::uint64_t I>
using ProgramAt = decltype(program_of<program_seed(I)>(std::make_integer_sequence<std::uint64_t, KILN_FUZZ_GRAPHS>{}));

#ifdef KILN_FUZZ_MINIMISE
static_assert(KILN_FUZZ_GRAPHS == 1, "KILN_FUZZ_MINIMISE minimises programs of one graph");
void run(Stats& st, kiln::Device dev, bool list) {
  constexpr std::uint64_t seed = program_seed(KILN_FUZZ_MINIMISE);
  using Graph = G<mix(seed), 1 + static_cast<int>(mix(seed) / 3 % 3)>;
  static_assert(std::is_same_v<Program<Graph>, ProgramAt<KILN_FUZZ_MINIMISE>>);
  std::printf("minimising program %d: %s\n", KILN_FUZZ_MINIMISE, Graph::str().c_str());
  if (list) return;
  with_element_type(seed, [&]<class T>() { return minimise<T>(st, seed, dev, typename subtrees<Graph>::type{}); });
}
#else
template <std::uint64_t... I>
void run_programs(Stats& st, kiln::Device dev, bool list, std::integer_sequence<std::uint64_t, I...>) {
  (run_program<ProgramAt<KILN_FUZZ_FIRST + I>>(st, KILN_FUZZ_FIRST + I, program_seed(KILN_FUZZ_FIRST + I), dev, list), ...);
}
void run(Stats& st, kiln::Device dev, bool list) {
  run_programs(st, dev, list, std::make_integer_sequence<std::uint64_t, KILN_FUZZ_PROGRAMS>{});
#ifdef KILN_FUZZ_REGRESSIONS
  if (list) return;
#define KILN_FUZZ_REGRESSION(T, seed, ...) check_program<Program<__VA_ARGS__>, T>(st, seed, dev, "regression " #__VA_ARGS__);
#include "regressions.inc"
#undef KILN_FUZZ_REGRESSION
#endif
}
#endif
}  // namespace
}  // namespace fuzz

int main(int argc, char** argv) {
  bool gpu = false, list = false;
  for (int i = 1; i < argc; ++i) {
    gpu |= std::strcmp(argv[i], "--gpu") == 0;
    list |= std::strcmp(argv[i], "--list") == 0;
  }
  if (gpu) {
#if KILN_CUDA_KERNELS
    if (kiln::cuda::device_count() == 0) {
      std::printf("SKIPPED: no CUDA device here (cudaGetDeviceCount found none)\n");
      return 77;  // ctest: skipped
    }
#else
    std::printf("--gpu: this executable was built without the CUDA kernels (configure with KILN_ENABLE_CUDA=ON)\n");
    return 2;
#endif
  }
  const test_support::ScopedCacheDir cache("differential");
  fuzz::Stats st;
  fuzz::run(st, gpu ? kiln::Device::cuda() : kiln::Device::cpu(), list);
  if (list) return 0;
#ifdef KILN_FUZZ_MINIMISE
  std::printf("differential: subtrees of program %d", KILN_FUZZ_MINIMISE);
#else
  std::printf("differential: programs %d..%d", KILN_FUZZ_FIRST, KILN_FUZZ_FIRST + KILN_FUZZ_PROGRAMS - 1);
#endif
  std::printf(" on the %s: %ld graphs, %ld runs, %ld values, %ld gradient checks (%ld "
              "skipped at a kink), %ld mismatches (%ld exceptions); worst error / tolerance %.3g\n",
              gpu ? "GPU" : "CPU", st.graphs, st.runs,
              st.values, st.grad_checks, st.grad_skipped, st.mismatches, st.errors, st.worst);
  return st.mismatches == 0 ? 0 : 1;
}
