// kiln: how CUDA kernels read and write a row: units of W consecutive columns (W = 1, element
// loads with any strides, or the W elements of one 16-byte load), their lanes widened to the
// compute type, row caches (none, shared memory or registers), the evaluation context of one lane,
// 16-byte stores, and a tree evaluated or reduced over a unit.
#pragma once
#include <cuda_runtime.h>

#include <bit>
#include <cstdint>

#include "kiln/backend/cuda/reduce_primitives.cuh"
#include "kiln/lower/args.hpp"
#include "kiln/lower/hoist.hpp"

namespace kiln::cuda {

// T: the storage type of loads; C: the compute type, in which values, stages and caches are kept.
template <class T, int NL, int NC, int NS, bool Cached>
struct DeviceRowContext {
  using C = compute_t<T>;
  static constexpr bool row_cache = Cached;
  static constexpr int result_bits = significand_bits<T>;  // the maths' precision (core/math.hpp)
  const T* row_ptr[NL > 0 ? NL : 1];
  index_t inner[NL > 0 ? NL : 1];
  C consts[NC > 0 ? NC : 1];
  C stages[NS > 0 ? NS : 1];
  C* cache[NS > 0 ? NS : 1];

  __device__ __forceinline__ C cached(int s, index_t j) const { return cache[s][j]; }
  template <int S>
  __device__ __forceinline__ C load(index_t j) const {
    return widen(row_ptr[S][j * inner[S]]);
  }
  template <int S>
  __device__ __forceinline__ C scalar() const {
    return widen(row_ptr[S][0]);
  }
  __device__ __forceinline__ C constant(int c) const { return consts[c]; }
  __device__ __forceinline__ C stage(int k) const { return stages[k]; }
};

template <class Ctx, class Args>
__device__ __forceinline__ void init_context(Ctx& ctx, const Args& a) {
  constexpr int NL = sizeof(a.inner) / sizeof(a.inner[0]);
  constexpr int NC = sizeof(a.consts) / sizeof(a.consts[0]);
#pragma unroll
  for (int s = 0; s < NL; ++s) ctx.inner[s] = a.inner[s];
#pragma unroll
  for (int c = 0; c < NC; ++c) ctx.consts[c] = a.consts[c];
}

// Points ctx's loads at row `row`.
template <class Ctx, class Args>
__device__ __forceinline__ void set_row(Ctx& ctx, const Args& a, index_t row) {
  lower::row_pointers(a, row, ctx.row_ptr);
}

// A unit of W elements of storage type S as loaded: the element itself (W = 1) or one 16-byte
// vector.
template <class S, int W>
using raw_t = std::conditional_t<W == 1, S, float4>;

// Lane K of a raw unit, widened to the compute type.
template <int K, class S, int W>
__device__ __forceinline__ compute_t<S> lane(const raw_t<S, W>& r) {
  if constexpr (W == 1) return widen(r);
  else return widen(reinterpret_cast<const S*>(&r)[K]);
}

inline constexpr bool loads_slot(std::uint64_t mask, int s) { return s >= 64 || ((mask >> (s % 64)) & 1u); }

// Fills v[s] with the unit at column j of each load s in Mask: W = 1: the element (any inner
// stride); W > 1: a 16-byte load where the inner stride is 1, the one element broadcast where
// it is 0.
// UnitInner (W > 1): the caller knows every inner stride in Mask is 1, so no test.
template <std::uint64_t Mask, int NL, int W, bool UnitInner = false, class S>
__device__ __forceinline__ void load_unit(raw_t<S, W> (&v)[NL > 0 ? NL : 1], const S* const* ptr, const index_t* inner,
                                          index_t j) {
#pragma unroll
  for (int s = 0; s < NL; ++s) {
    if (!loads_slot(Mask, s)) continue;
    if constexpr (W == 1) {
      v[s] = ptr[s][j * inner[s]];
    } else if (UnitInner || inner[s] == 1) {
      v[s] = *reinterpret_cast<const float4*>(ptr[s] + j);
    } else {
      S* xs = reinterpret_cast<S*>(&v[s]);
      const S x = ptr[s][0];
#pragma unroll
      for (int k = 0; k < W; ++k) xs[k] = x;
    }
  }
}

// Row caches, as LaneContext reads them: none, or one per cached stage in shared memory, lane K
// of unit ju at K * nu + ju (nu units per row): consecutive threads touch consecutive words, so
// shared memory serves a warp without bank conflicts.
struct NoRowCache {
  static constexpr bool enabled = false;
  template <int K, class T>
  __device__ __forceinline__ T get(int, index_t, int) const {
    return T();
  }
};
template <class T>
struct SharedRowCache {
  static constexpr bool enabled = true;
  T* const* cache;
  index_t nu;
  template <int K, class U = T>
  __device__ __forceinline__ U get(int s, index_t ju, int) const {
    return cache[s][K * nu + ju];
  }
  __device__ __forceinline__ T* slot(int s, int k, index_t ju, int) const { return cache[s] + k * nu + ju; }
};
// The register path's: the kept stages' values of the thread's R units in registers, unit i of
// the thread's (a constant once the loops over i are unrolled), lane K.
template <class T, int NS, int R, int W>
struct RegisterRowCache {
  static constexpr bool enabled = true;
  T (*v)[R][W];
  template <int K, class U = T>
  __device__ __forceinline__ U get(int s, index_t, int i) const {
    return v[s][i][K];
  }
  __device__ __forceinline__ T* slot(int s, int k, index_t, int i) const { return &v[s][i][k]; }
};

// Lane K of unit ju: loads read the unit's registers; stages and row caches are the row's.
template <class S, int NL, int W, int K, class Cache = NoRowCache>
struct LaneContext {
  using T = compute_t<S>;
  static constexpr bool row_cache = Cache::enabled;
  static constexpr int result_bits = significand_bits<S>;  // the maths' precision (core/math.hpp)
  const raw_t<S, W> (&v)[NL > 0 ? NL : 1];
  const T* consts;
  const T* stages = nullptr;
  Cache cache{};
  index_t ju = 0;
  int unit = 0;  // the register path's unit number among the thread's
  template <int L>
  __device__ __forceinline__ T load(index_t) const {
    return lane<K, S, W>(v[L]);
  }
  template <int L>
  __device__ __forceinline__ T scalar() const {
    return lane<0, S, W>(v[L]);
  }
  __device__ __forceinline__ T constant(int c) const { return consts[c]; }
  __device__ __forceinline__ T stage(int k) const { return stages[k]; }
  __device__ __forceinline__ T cached(int s, index_t) const { return cache.template get<K, T>(s, ju, unit); }
};

// The bits of an f32, i32, bf16 or f16 value.
template <class S>
__device__ __forceinline__ unsigned bits_of(S x) {
  if constexpr (std::is_same_v<S, float>) return __float_as_uint(x);
  else if constexpr (std::is_integral_v<S>) return static_cast<unsigned>(x);
  else return x.bits;
}

// Stores the 16 bytes x[0..W) at p (16-byte aligned, global memory) with one 16-byte store.
// In PTX: nvcc 13.0 splits a float4 or uint4 store built from scalars into four 4-byte stores
// in some kernels (the pointwise kernels' stores were all split), which quadruples the store
// instructions and leaves each one a strided, partial write.
template <class S, int W>
__device__ __forceinline__ void store_vector(S* p, const S (&x)[W]) {
  static_assert(W * sizeof(S) == 16, "kiln: a 16-byte vector");
  unsigned w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(S) == 4) w[k] = bits_of(x[k]);
    else w[k] = bits_of(x[2 * k]) | (bits_of(x[2 * k + 1]) << 16);
  }
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
}

// Tree at the W lanes of unit ju (columns ju * W + K), stored at out + ju * W.
template <class Tree, class S, int NL, int W, class Cache>
__device__ __forceinline__ void store_unit(S* out, const raw_t<S, W> (&v)[NL > 0 ? NL : 1], const compute_t<S>* consts,
                                           const compute_t<S>* stages, Cache cache, index_t ju, int unit = 0) {
  using T = compute_t<S>;
  S o[W];
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((o[K] = narrow<S>(
          Tree::template eval<T>(LaneContext<S, NL, W, K, Cache>{v, consts, stages, cache, ju, unit}, ju * W + K))),
     ...);
  }(std::make_integer_sequence<int, W>{});
  if constexpr (W == 1) out[ju] = o[0];
  else store_vector(out + ju * W, o);
}

// Combines Tree's values at the W lanes of unit ju into acc, in lane order; with Keep also
// stores each in the stage's row cache (keep).
template <class Tree, ReduceKind Kind, bool Keep, class S, int NL, int W, class Cache>
__device__ __forceinline__ compute_t<S> reduce_unit(compute_t<S> acc, const raw_t<S, W> (&v)[NL > 0 ? NL : 1],
                                                    const compute_t<S>* consts, const compute_t<S>* stages, Cache cache,
                                                    int s, index_t ju, int unit = 0) {
  using T = compute_t<S>;
  [&]<int... K>(std::integer_sequence<int, K...>) {
    ((acc = combine<Kind>(acc, [&] {
        const T x =
            Tree::template eval<T>(LaneContext<S, NL, W, K, Cache>{v, consts, stages, cache, ju, unit}, ju * W + K);
        if constexpr (Keep) *cache.slot(s, K, ju, unit) = x;
        return x;
      }())),
     ...);
  }(std::make_integer_sequence<int, W>{});
  return acc;
}

// Adds Tree's values at the W lanes of unit ju to the online pair (m, d), in lane order.
template <class Tree, class S, int NL, int W>
__device__ __forceinline__ void online_unit(compute_t<S>& m, compute_t<S>& d, const raw_t<S, W> (&v)[NL > 0 ? NL : 1],
                                            const compute_t<S>* consts, const compute_t<S>* stages, index_t ju) {
  using T = compute_t<S>;
  [&]<int... K>(std::integer_sequence<int, K...>) {
    (online_add<significand_bits<S>>(
         m, d, Tree::template eval<T>(LaneContext<S, NL, W, K, NoRowCache>{v, consts, stages, NoRowCache{}, ju, 0}, ju * W + K)),
     ...);
  }(std::make_integer_sequence<int, W>{});
}

// The load slots a row kernel's stages read: the register path keeps these for the whole row;
// loads only the output reads (a layer norm's gamma and beta) are read when it is written.
template <class Stages>
struct stage_loads;
template <class... Ss>
struct stage_loads<lower::TypeList<Ss...>> {
  static constexpr std::uint64_t value = (std::uint64_t{0} | ... | lower::tree_loads<typename Ss::tree, false>::value);
};

}  // namespace kiln::cuda
