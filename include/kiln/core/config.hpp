// kiln: build configuration shared by every stage.
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define KILN_HOST_DEVICE __host__ __device__
#else
#define KILN_HOST_DEVICE
#endif

// The compiled-program types live in an inline namespace named by the backends the translation
// unit has: CPU only, or CPU and CUDA. The two then never share a symbol, so translation units
// of both kinds can be linked into one program.
// A host-compiled translation unit gets the CUDA backend too when the build defines
// KILN_CUDA_KERNELS and supplies its kernels (kiln_cuda_executable in CMake; docs/cuda.md).
#if defined(__CUDACC__) || defined(KILN_CUDA_KERNELS)
#define KILN_WITH_CUDA 1
#define KILN_BACKEND_NS cpu_and_cuda
#else
#define KILN_WITH_CUDA 0
#define KILN_BACKEND_NS cpu_only
#endif

#if defined(__GNUC__)
#define KILN_INLINE inline __attribute__((always_inline))
#define KILN_NOINLINE __attribute__((noinline))
#else
#define KILN_INLINE inline
#define KILN_NOINLINE
#endif

// A pragma that asks for a SIMD loop; needs -fopenmp or -fopenmp-simd (kiln::kiln adds -fopenmp).
#if defined(_OPENMP)
#define KILN_PRAGMA(x) _Pragma(#x)
#define KILN_SIMD KILN_PRAGMA(omp simd)
#define KILN_SIMD_REDUCE(op, var) KILN_PRAGMA(omp simd reduction(op : var))
#define KILN_SIMD_REDUCE2(op, var, op2, var2) KILN_PRAGMA(omp simd reduction(op : var) reduction(op2 : var2))
#else
#define KILN_SIMD
#define KILN_SIMD_REDUCE(op, var)
#define KILN_SIMD_REDUCE2(op, var, op2, var2)
#endif

namespace kiln {
// Largest tensor rank kiln handles; Shape and every stride table are sized by it.
inline constexpr int kMaxRank = 6;
using index_t = std::ptrdiff_t;
}  // namespace kiln
