// kiln: the dropout kind on the CPU (kiln::dropout; lower/args.hpp's DropoutArgs): rows spread
// over threads; each element's mask from Philox4x32-10 (core/philox.hpp), one block of four
// numbers per four consecutive elements, the same bits the CUDA kernel draws.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/backend/cpu/parallel.hpp"
#include "kiln/core/philox.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cpu {

template <class Desc>
struct DropoutKernelCpu;

template <class T>
struct DropoutKernelCpu<lower::DropoutKernel<T>> {
  using Args = lower::DropoutArgs<T>;

  static void run(const Args& a) {
    const auto seed = static_cast<std::uint64_t>(a.ids[0]), offset = static_cast<std::uint64_t>(a.ids[1]);
    parallel_for(a.rows, threads_for(a.rows * a.len, a.config), [&](index_t r) {
      const T* src[1];
      lower::row_pointers(a, r, src);
      T* out = a.out + r * a.len;
      philox::Words block{};
      std::uint64_t have = ~std::uint64_t{0};  // the block held, by number
      for (index_t j = 0; j < a.len; ++j) {
        const auto e = static_cast<std::uint64_t>(r * a.len + j);
        if (e / 4 != have) {
          have = e / 4;
          block = philox::block(seed, offset, a.stream, have);
        }
        const bool keep = philox::to_uniform(block.w[e % 4]) >= a.p;
        out[j] = keep ? narrow<T>(widen(src[0][j * a.inner[0]]) * a.scale) : T(0);
      }
    });
  }

  // MaxAutotune's candidates: one thread or all.
  static std::vector<LaunchConfig> candidates(const Args&) { return {{1, 0, 0, 0}, {max_threads(), 0, 0, 0}}; }
};

}  // namespace kiln::cpu
