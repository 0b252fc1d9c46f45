// kiln: the CPU's threads. OpenMP when the translation unit is built with it, else one thread.
#pragma once
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "kiln/core/config.hpp"

namespace kiln::cpu {

inline int max_threads() {
#if defined(_OPENMP)
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// Below this many elements a kernel runs on the calling thread: a fork-join costs a few
// microseconds, which small kernels cannot repay.
inline constexpr index_t kParallelThreshold = 1 << 15;

// Runs body(task) for task in [0, ntasks), across threads when work is large enough.
template <class Body>
void parallel_for(index_t ntasks, index_t work, Body&& body) {
#if defined(_OPENMP)
  if (ntasks > 1 && work >= kParallelThreshold && max_threads() > 1) {
#pragma omp parallel for schedule(static)
    for (index_t t = 0; t < ntasks; ++t) body(t);
    return;
  }
#endif
  for (index_t t = 0; t < ntasks; ++t) body(t);
}

}  // namespace kiln::cpu
