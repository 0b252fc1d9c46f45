// kiln's differential fuzzer: KILN_FUZZ_PROGRAMS programs of KILN_FUZZ_GRAPHS graphs each, from
// program KILN_FUZZ_FIRST on (compile definitions, so a sweep is several of these executables
// built in parallel), each checked in every mode and backend against float64 (differential.hpp).
// Prints what failed and a summary; exits 1 on any mismatch. --gpu runs them on the GPU (in a
// build with the CUDA kernels); --list prints the programs' graphs and runs nothing.
// The float64 reference (tests/reference.hpp) comes with doctest's macros; this program has no
// test cases of its own.
#define DOCTEST_CONFIG_DISABLE
#include <cstring>
#include <utility>

#include "../scoped_cache_dir.hpp"
#include "differential.hpp"

#ifndef KILN_FUZZ_FIRST
#define KILN_FUZZ_FIRST 0
#endif
#ifndef KILN_FUZZ_PROGRAMS
#define KILN_FUZZ_PROGRAMS 2
#endif
#ifndef KILN_FUZZ_GRAPHS
#define KILN_FUZZ_GRAPHS 1
#endif

namespace {
constexpr std::uint64_t program_seed(std::uint64_t i) { return fuzz::mix(0x6b696c6eull + i) * KILN_FUZZ_GRAPHS; }

template <std::uint64_t... I>
void run_programs(fuzz::Stats& st, kiln::Device dev, bool list, std::integer_sequence<std::uint64_t, I...>) {
  (fuzz::run_program<decltype(fuzz::program_of<program_seed(KILN_FUZZ_FIRST + I)>(
       std::make_integer_sequence<std::uint64_t, KILN_FUZZ_GRAPHS>{}))>(st, program_seed(KILN_FUZZ_FIRST + I), dev, list),
   ...);
}
}  // namespace

int main(int argc, char** argv) {
  bool gpu = false, list = false;
  for (int i = 1; i < argc; ++i) {
    gpu |= std::strcmp(argv[i], "--gpu") == 0;
    list |= std::strcmp(argv[i], "--list") == 0;
  }
  const test_support::ScopedCacheDir cache("differential");
  fuzz::Stats st;
  run_programs(st, gpu ? kiln::Device::cuda() : kiln::Device::cpu(), list,
               std::make_integer_sequence<std::uint64_t, KILN_FUZZ_PROGRAMS>{});
  if (list) return 0;
  std::printf("differential: programs %d..%d on the %s: %ld graphs, %ld runs, %ld values, %ld gradient checks (%ld "
              "skipped at a kink), %ld mismatches (%ld exceptions); worst error / tolerance %.3g\n",
              KILN_FUZZ_FIRST, KILN_FUZZ_FIRST + KILN_FUZZ_PROGRAMS - 1, gpu ? "GPU" : "CPU", st.graphs, st.runs,
              st.values, st.grad_checks, st.grad_skipped, st.mismatches, st.errors, st.worst);
  return st.mismatches == 0 ? 0 : 1;
}
