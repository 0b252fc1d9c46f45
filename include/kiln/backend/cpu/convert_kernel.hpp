// kiln: the convert kind on the CPU (kiln::cast; lower/args.hpp's ConvertArgs): each element of
// the operand, read through its strides, converted by kiln::convert (core/dtype.hpp) into the
// contiguous output. Rows are spread over threads; a row whose source has unit stride is a
// SIMD loop.
#pragma once
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cpu {

template <class Desc>
struct ConvertKernelCpu;

template <class To, class From>
struct ConvertKernelCpu<lower::ConvertKernel<To, From>> {
  using Args = lower::ConvertArgs<To, From>;

  static void run(const Args& a) {
    parallel_for(a.rows, threads_for(a.rows * a.len, a.config), [&](index_t r) {
      const From* src[1];
      lower::row_pointers(a, r, src);
      To* __restrict out = a.to + r * a.len;
      const From* __restrict in = src[0];
      if (a.inner[0] == 1) {
        KILN_SIMD
        for (index_t j = 0; j < a.len; ++j) out[j] = convert<To>(in[j]);
      } else {
        for (index_t j = 0; j < a.len; ++j) out[j] = convert<To>(in[j * a.inner[0]]);
      }
    });
  }

  // MaxAutotune's candidates: one thread or all.
  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }
};

}  // namespace kiln::cpu
