// The CUDA tests' main: without a CUDA device the whole executable is skipped (ctest reads
// exit code 77 as "skipped") and says why; CI builds these tests but has no GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include <kiln/backend/cuda/runtime.hpp>

int main(int argc, char** argv) {
  if (kiln::cuda::device_count() == 0) {
    std::printf("SKIPPED: no CUDA device here (cudaGetDeviceCount found none); these tests run on a GPU machine\n");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
