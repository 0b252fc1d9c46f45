// The tests' main. An executable built with the CUDA kernels holds each shared case twice
// (DEVICE_CASE, tests/on_device.hpp): on the CPU, and in the test suite "gpu" with its inputs on
// the GPU. Without an option it runs what is not in that suite; with --on-gpu it runs that suite
// alone, and where there is no CUDA device it says so and exits 77, which ctest counts as
// skipped (CI builds the GPU cases but has no GPU). Every other option is doctest's.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

#if KILN_TEST_WITH_CUDA
#include <kiln/backend/cuda/runtime.hpp>
#endif

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
  return context.run();
}
