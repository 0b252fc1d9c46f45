// kiln: the CPU's threads. OpenMP when the translation unit is built with it, else one thread.
#pragma once
#if defined(_OPENMP)
#include <omp.h>
#endif

#include <algorithm>

#include "kiln/core/config.hpp"
#include "kiln/lower/args.hpp"

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

inline int thread_index() {
#if defined(_OPENMP)
  return omp_get_thread_num();
#else
  return 0;
#endif
}

using lower::LaunchConfig;

// The number of threads a kernel of `work` elements runs on under `cfg`.
inline int threads_for(index_t work, const LaunchConfig& cfg) {
  if (cfg.threads > 0) return std::min(cfg.threads, max_threads());
  return work >= kParallelThreshold ? max_threads() : 1;
}

// Runs body(task) for task in [0, ntasks) on `threads` threads.
template <class Body>
void parallel_for(index_t ntasks, int threads, Body&& body) {
#if defined(_OPENMP)
  if (ntasks > 1 && threads > 1) {
#pragma omp parallel for schedule(static) num_threads(threads)
    for (index_t t = 0; t < ntasks; ++t) body(t);
    return;
  }
#endif
  for (index_t t = 0; t < ntasks; ++t) body(t);
}

}  // namespace kiln::cpu
