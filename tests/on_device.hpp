// The device the shared op cases (broadcast_cases.hpp, reduce_cases.hpp, ...) create their
// inputs on, and so run their kernels on: the CPU unless a GPU test sets it (OnGpu). Inputs are
// drawn on the CPU, so every device sees the same values, and results come back with .cpu()
// to be checked against the float64 reference, which always runs on the CPU.
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
