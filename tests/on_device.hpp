// The device the shared op cases (broadcast_cases.hpp, reduce_cases.hpp, ...) create their
// inputs on, and so run their kernels on: the CPU unless a GPU test sets it (OnGpu). Inputs are
// drawn on the CPU, so every device sees the same values, and results come back with .cpu()
// to be checked against the float64 reference, which always runs on the CPU.
//
// DEVICE_CASE(name, body) registers a case the CPU runs and, in a build with the CUDA kernels
// (KILN_CUDA_KERNELS: the test executables built by kiln_cuda_executable), one more that runs
// the same body with device() the GPU, named "<name> (GPU)" (doctest keeps one of two cases of
// one name on one line), in the test suite "gpu". One executable thus tests both
// devices, and its cases are compiled once: tests/test_main.cpp runs the CPU's cases, or with
// --on-gpu the suite "gpu" (ctest's label `cuda`), skipped where there is no GPU.
#pragma once
#include "reference.hpp"

namespace cases {

inline kiln::Device& device() {
  static kiln::Device d = kiln::Device::cpu();
  return d;
}

// A doctest fixture: the cases of one test case run on the GPU, then the CPU is put back.
struct OnGpu {
  OnGpu() { device() = kiln::Device::cuda(); }
  ~OnGpu() { device() = kiln::Device::cpu(); }
};

// kiln::randn drawn on the CPU, moved to device().
template <class T = float>
kiln::Tensor<T> randn(const kiln::Shape& shape, std::uint64_t seed) {
  return kiln::randn<T>(shape, seed).to(device());
}

}  // namespace cases

#define DEVICE_CASE(name, ...)   \
  TEST_CASE(name) { __VA_ARGS__; } \
  GPU_CASE(name, __VA_ARGS__)
#if KILN_CUDA_KERNELS
#define GPU_CASE(name, ...) \
  TEST_CASE_FIXTURE(cases::OnGpu, name " (GPU)" * doctest::test_suite("gpu")) { __VA_ARGS__; }
#else
#define GPU_CASE(name, ...)
#endif
