// The tests' main. An executable built with the CUDA kernels holds each shared case twice
// (DEVICE_CASE, tests/on_device.hpp): on the CPU, and in the test suite "gpu" with its inputs on
// the GPU. Without an option it runs what is not in that suite; with --on-gpu it runs that suite
// alone, and where there is no CUDA device it says so and exits 77, which ctest counts as
// skipped (CI builds the GPU cases but has no GPU). Every other option is doctest's.
//
// The tests write their files under the temporary directory, named kiln<...> with this
// process's id as one part of the name (kiln_model_gpt2_1234, kiln-autotune-x-1234.out); what a
// case left there is removed when the run ends, so that test runs leave nothing behind.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#if KILN_TEST_WITH_CUDA
#include <kiln/backend/cuda/runtime.hpp>
#endif

namespace {
// Removes the entries of the temporary directory named kiln... with this process's id as a part
// of the name between '_', '-' or '.' separators.
void remove_own_temporaries() {
  namespace fs = std::filesystem;
  const std::string pid = std::to_string(::getpid());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(ec), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("kiln", 0) != 0) continue;
    for (std::size_t at = name.find(pid); at != std::string::npos; at = name.find(pid, at + 1)) {
      const auto separator = [](char c) { return c == '_' || c == '-' || c == '.'; };
      const std::size_t end = at + pid.size();
      if (at > 0 && separator(name[at - 1]) && (end == name.size() || separator(name[end]))) {
        fs::remove_all(entry.path(), ec);
        break;
      }
    }
  }
}
}  // namespace

int main(int argc, char** argv) {
  bool on_gpu = false;
  for (int i = 1; i < argc; ++i) on_gpu = on_gpu || std::strcmp(argv[i], "--on-gpu") == 0;
  doctest::Context context(argc, argv);
  if (on_gpu) {
#if KILN_TEST_WITH_CUDA
    if (kiln::cuda::device_count() == 0) {
      std::printf("SKIPPED: no CUDA device here (cudaGetDeviceCount found none); these cases run on a GPU machine\n");
      return 77;
    }
    context.addFilter("test-suite", "gpu");
#else
    std::printf("--on-gpu: this executable was built without the CUDA kernels (configure with KILN_ENABLE_CUDA=ON)\n");
    return 2;
#endif
  } else {
    context.addFilter("test-suite-exclude", "gpu");
  }
  const int status = context.run();
  remove_own_temporaries();
  return status;
}
