// kiln: where a tensor lives. kiln::Device::cpu() or kiln::Device::cuda(i). The CUDA side
// (memory, copies) is installed by <kiln/backend/cuda/runtime.hpp>, which needs the CUDA
// runtime (CUDA::cudart) but not nvcc; a program without it that asks for CUDA memory gets a
// DeviceError saying so. Running compiled kernels on CUDA tensors needs a translation unit built
// by nvcc (the CUDA backend); one built by g++ runs the CPU backend only.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>

namespace kiln {

struct Device {
  enum class Kind : unsigned char { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;

  static constexpr Device cpu() { return {Kind::CPU, 0}; }
  static constexpr Device cuda(int i = 0) { return {Kind::CUDA, i}; }
  constexpr bool is_cpu() const { return kind == Kind::CPU; }
  constexpr bool is_cuda() const { return kind == Kind::CUDA; }
  friend constexpr bool operator==(Device a, Device b) { return a.kind == b.kind && (a.is_cpu() || a.index == b.index); }
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

// A call that mixes devices, or needs a backend this translation unit was not built with.
struct DeviceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failed CUDA, cuBLAS or cuBLASLt call: the message names the call, its error, file and line;
// code is the cudaError_t of a CUDA runtime call (0 otherwise).
struct CudaError : std::runtime_error {
  explicit CudaError(const std::string& what, int error_code = 0) : std::runtime_error(what), code(error_code) {}
  int code = 0;
};

// The device has not the memory asked for, even after kiln's cache gave back what it held.
// The process can go on: nothing was allocated.
struct OutOfMemory : std::runtime_error {
  OutOfMemory(const std::string& what, std::size_t requested_bytes, std::size_t free_bytes)
      : std::runtime_error(what), requested(requested_bytes), free(free_bytes) {}
  std::size_t requested, free;
};

namespace detail {
// The CUDA memory functions, set by backend/cuda/runtime.hpp when a translation unit of the
// program includes it (a function table keeps g++-built code free of CUDA symbols).
struct DeviceHooks {
  void* (*allocate)(std::size_t bytes, int device) = nullptr;
  void (*release)(void* p, std::size_t bytes, int device) noexcept = nullptr;
  // kind: 0 host to device, 1 device to host, 2 device to device; synchronous for host copies.
  void (*copy)(void* dst, const void* src, std::size_t bytes, int kind) = nullptr;
};
inline DeviceHooks& device_hooks() {
  static DeviceHooks hooks;
  return hooks;
}
inline const DeviceHooks& cuda_hooks_or_throw(const char* what) {
  const DeviceHooks& h = device_hooks();
  if (!h.allocate)
    throw DeviceError(std::string(what) +
                      ": this program has no CUDA support; include <kiln/backend/cuda/runtime.hpp> (or build a "
                      "translation unit with nvcc) and link CUDA::cudart");
  return h;
}
}  // namespace detail

}  // namespace kiln
