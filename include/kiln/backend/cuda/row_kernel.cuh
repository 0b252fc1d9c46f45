// kiln: the row kernel on CUDA (pointwise and row-reduction kinds), one __global__ template
// instantiated per lowered RowKernel descriptor. Arguments are the CPU backend's RowArgs,
// passed by value (trivially copyable: pointers, strides, extents, scalars).
//
// Both kinds work in units of W consecutive columns: W = 1 (element loads, any strides), or
// the W elements of one 16-byte load (4 f32, 8 bf16 or f16) where every load has inner stride 1
// or 0, rows are whole vectors and pointers are 16-byte aligned. A unit's loads sit in
// registers as loaded (raw, widened on use) and its W lanes are evaluated with compile-time
// lane numbers, so the maths runs on registers.
//
// Pointwise (no stages): a grid-stride loop over the units of rows x len.
//
// Row reduction: a warp per row or a block per row. Each stage reduces its tree over the row
// (shuffles, then shared memory across warps); NaN wins max/min as on the CPU; the output tree
// then writes the row. Two ways to read the row:
// - registers (R > 0): the row's units are loaded once, R per thread, and every stage and the
//   output read them there: one pass over memory (loads only the output reads come in with it).
//   Where the row fits: up to kRowRegisterThreads x R units; longer rows (up to kRowClusterMax
//   times that, on devices with clusters) are split over the blocks of a thread-block cluster
//   (Split), which add their partial results through distributed shared memory, so a long row
//   is still read once and by many SMs. Its descriptor (RegisterDesc)
//   reads each node through one slot (SlotAlias) and keeps the values of the stages the output
//   reads (LCached) in registers too.
// Both: the output tree's row-invariant subtrees are evaluated once per row, after the stages,
// into extra stage slots (lower/hoist.hpp).
// - streamed (R = 0): each stage and the output read the loads their trees use again (from L1
//   or L2). Stage values a later tree reads (LCached) are kept in shared memory when the row
//   fits, else recomputed.
#pragma once
#include <bit>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <map>
#include <unordered_map>
#include <vector>

#include "kiln/backend/cpu/row_kernel.hpp"
#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/runtime.hpp"
#include "kiln/lower/hoist.hpp"
#include "kiln/lower/online.hpp"

namespace kiln::cuda {

inline constexpr index_t kWarpRowMax = 2048;     // rows up to this length: a warp per row
inline constexpr std::size_t kRowCacheBytes = 40 * 1024;  // cached stages; under the 48 KiB a block gets without opt-in

template <ReduceKind K, class T>
__device__ __forceinline__ T combine(T a, T b) {
  if constexpr (std::is_same_v<T, float> && (K == ReduceKind::Max || K == ReduceKind::Min)) {
    // One instruction where NaN wins (sm_80's max.NaN / min.NaN) instead of compare and select.
    float r;
    if constexpr (K == ReduceKind::Max) asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    else asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
  } else if constexpr (K == ReduceKind::Max) return (b != b || b > a) ? b : a;
  else if constexpr (K == ReduceKind::Min) return (b != b || b < a) ? b : a;
  else return a + b;
}

template <ReduceKind K, class T>
__device__ __forceinline__ T warp_reduce(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = combine<K>(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Reduces v over the block (every thread gets the result). scratch: 32 values of shared memory.
template <ReduceKind K, class T>
__device__ __forceinline__ T block_reduce(T v, T* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  v = warp_reduce<K>(v);
  __syncthreads();  // scratch may still be read by an earlier reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nwarps ? scratch[lane] : Reduce<K, 0, false, false>::template identity<T>();
  return warp_reduce<K>(v);
}

// Online softmax's pair (lower/online.hpp): m the running maximum, d the sum of e^(x - m).
// Bits: the precision of the kernel's results (core/math.hpp), as its Exp op would use.
// Merging (m2, d2) rescales each sum to the larger maximum (m = mn, also -inf: nothing to rescale).
template <int Bits, class T>
__device__ __forceinline__ void online_merge(T& m, T& d, T m2, T d2) {
  const T mn = combine<ReduceKind::Max>(m, m2);
  d = (m == mn ? d : d * math::exp<Bits>(m - mn)) + (m2 == mn ? d2 : d2 * math::exp<Bits>(m2 - mn));
  m = mn;
}
// Adding a value x is merging the pair (x, 1).
template <int Bits, class T>
__device__ __forceinline__ void online_add(T& m, T& d, T x) {
  online_merge<Bits>(m, d, x, T(1));
}
template <int Bits, class T>
__device__ __forceinline__ void warp_online(T& m, T& d) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const T m2 = __shfl_xor_sync(0xffffffffu, m, o), d2 = __shfl_xor_sync(0xffffffffu, d, o);
    online_merge<Bits>(m, d, m2, d2);
  }
}
// Over the block (every thread gets the pair). sm, sd: 32 values of shared memory each.
template <int Bits, class T>
__device__ __forceinline__ void block_online(T& m, T& d, T* sm, T* sd) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  warp_online<Bits>(m, d);
  __syncthreads();
  if (lane == 0) sm[warp] = m, sd[warp] = d;
  __syncthreads();
  m = lane < nwarps ? sm[lane] : -std::numeric_limits<T>::infinity();
  d = lane < nwarps ? sd[lane] : T(0);
  warp_online<Bits>(m, d);
}

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
  cpu::row_pointers(a, row, ctx.row_ptr);
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

// The bits of an f32, bf16 or f16 value.
template <class S>
__device__ __forceinline__ unsigned bits_of(S x) {
  if constexpr (std::is_same_v<S, float>) return __float_as_uint(x);
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

template <class Desc>
struct RowKernelCuda;

// The virtual architecture a kernel's code was compiled for (compute_XY as XY: its
// __CUDA_ARCH__ / 10), on the current device. Code for an older one runs on Hopper (its PTX
// compiled at load) without what kiln guards with __CUDA_ARCH__ >= 900: clusters, waits.
template <class Kernel>
int code_arch(Kernel* kernel) {
  cudaFuncAttributes fa{};
  KILN_CUDA_CHECK(cudaFuncGetAttributes(&fa, kernel));
  return fa.ptxVersion;
}

// Programmatic dependent launch (Hopper): a kernel launched with launch_after_previous may
// start while the kernel before it on the stream is still running; before it touches global
// memory it waits for that kernel to complete (and its writes to be visible), and once it has
// waited it lets the next kernel start. So each launch and block start-up overlaps the previous
// kernel's last blocks instead of following them (a gap of a few microseconds, much of a kernel
// that moves 50-100 MB). Every kernel launched so must call await_previous_kernel first.
__device__ __forceinline__ void await_previous_kernel() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
#endif
}
// A launch's configuration for cudaLaunchKernelEx, with its attributes: thread-block clusters
// of `cluster` blocks (none where that is one block) and a programmatic dependent launch
// (`dependent`: only for a kernel that calls await_previous_kernel first and whose code waits,
// code_arch >= 90). Not copyable: config points at attrs.
struct KernelLaunch {
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attrs[2]{};
  KernelLaunch(dim3 blocks, dim3 threads, std::size_t smem, cudaStream_t stream, dim3 cluster, bool dependent) {
    config.gridDim = blocks;
    config.blockDim = threads;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    unsigned n = 0;
    if (cluster.x * cluster.y * cluster.z > 1) {
      attrs[n].id = cudaLaunchAttributeClusterDimension;
      attrs[n].val.clusterDim.x = cluster.x;
      attrs[n].val.clusterDim.y = cluster.y;
      attrs[n].val.clusterDim.z = cluster.z;
      ++n;
    }
    if (dependent) {
      attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    config.attrs = attrs;
    config.numAttrs = n;
  }
  KernelLaunch(const KernelLaunch&) = delete;
  KernelLaunch& operator=(const KernelLaunch&) = delete;
};

template <auto Kernel, class... Args>
void launch_after_previous(dim3 blocks, dim3 threads, std::size_t smem, cudaStream_t stream, const Args&... args) {
  // Only a device with it (Hopper on), and code that waits (compiled for sm_90 on; asked once
  // per device): other code is launched in stream order.
  thread_local std::unordered_map<int, bool> waits;
  const int device = current_device();
  auto it = waits.find(device);
  if (it == waits.end()) it = waits.emplace(device, device_has_clusters() && code_arch(Kernel) >= 90).first;
  const KernelLaunch launch(blocks, threads, smem, stream, dim3(1), it->second);
  KILN_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, Kernel, args...));
}

// Pointwise: units of W elements (W = 1: element loads; else 16-byte ones), U units per thread.
// A block covers U * blockDim consecutive units, thread t those at t + u * blockDim (a warp's
// loads of one u are consecutive), in a grid-stride loop; a thread issues all U units' loads
// before any maths, so a thread whose maths is long (W1: ~50 instructions per f32 value) still
// has U loads in flight, which memory speed needs (Little's law: ~20 KiB in flight per SM).
// One row with unit inner strides (W1, and any elementwise expression over same-shaped
// contiguous tensors) takes a path with no row arithmetic per unit: its loads read at the
// element index itself, and it is pipelined (below). W1 issues an instruction on about 80% of
// cycles (ncu), so each one counts (docs/notes/cuda-status.md, thirteenth session).
template <int NL>
inline constexpr int kPointwiseUnits = NL <= 2 ? 4 : NL <= 4 ? 2 : 1;

// The load slots a pointwise kernel reads (its output tree's and its extra outputs').
template <class Desc>
inline constexpr std::uint64_t pointwise_loads = []<class... E>(lower::TypeList<E...>) {
  return (lower::tree_loads<typename Desc::out_tree, false>::value | ... | lower::tree_loads<E, false>::value);
}(typename Desc::extras{});

// The flat case: one row, every load read with inner stride 1 (a rank-0 load's is 0: a
// broadcast), so element e of every load is at e.
template <class Desc, class Args>
bool pointwise_flat(const Args& a) {
  bool flat = a.rows == 1;
  for (int s = 0; s < Desc::nloads; ++s)
    if (loads_slot(pointwise_loads<Desc>, s)) flat = flat && a.inner[s] == 1;
  return flat;
}

// Flat: 0 the general kernel; 1 the flat case (the caller checked pointwise_flat), a kernel of
// its own so that its registers do not count against the general one's occupancy (in one
// kernel, W4's gelu(acc + b) went from 80 to 86 registers, two blocks of 256 an SM instead of
// three, 21.4 -> 23.0 us); 2 the flat case over several rows where the loads in Laid are laid
// out as the output and the others are one row broadcast over the rows (a bias:
// pointwise_rows_flat). Those are read at the unit's column (which each thread carries from span
// to span by one addition) when the unit is computed, not a span ahead: they stay in L1, and
// registers hold only the laid-out loads in flight. Kernel 2 is launched for GEMM epilogues
// only (RowKernelCuda::run_epilogue), so other kernels do not instantiate it.
template <class Desc, int W, int Flat, class Args, std::uint64_t Laid = 0>
__global__ void pointwise_kernel(const Args a) {
  await_previous_kernel();
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int NL = Desc::nloads, U = kPointwiseUnits<NL>;
  constexpr std::uint64_t Mask = pointwise_loads<Desc>;
  const index_t nu = a.len / W, total = a.rows * nu;
  const index_t step = blockDim.x, span = step * U;  // a thread's units are step apart
  T consts[Desc::nconsts > 0 ? Desc::nconsts : 1];
#pragma unroll
  for (int c = 0; c < Desc::nconsts; ++c) consts[c] = a.consts[c];
  const index_t stride = span * gridDim.x;
  // Stores a unit at row r, unit ju, and the extra outputs (kernels merged into this one) from
  // the same registers: every load of the unit was issued first, so an output that overwrites
  // an input cannot change them.
  const auto store = [&](const raw_t<S, W>(&vu)[NL > 0 ? NL : 1], index_t r, index_t ju) {
    store_unit<typename Desc::out_tree, S, NL, W>(a.out + r * a.len, vu, consts, nullptr, NoRowCache{}, ju);
    if constexpr (Desc::nextra > 0) {
      [&]<class... E, int... I>(lower::TypeList<E...>, std::integer_sequence<int, I...>) {
        ((a.extra_out[I] ? store_unit<E, S, NL, W>(a.extra_out[I] + r * a.len, vu, consts, nullptr, NoRowCache{}, ju) : void()),
         ...);
      }(typename Desc::extras{}, std::make_integer_sequence<int, Desc::nextra>{});
    }
  };
  if constexpr (Flat > 0) {
    // The flat path, pipelined: a thread issues the loads of its next span before the maths of
    // this one, so loads stay in flight while it computes (run() launches the blocks an SM holds
    // at once, so most threads loop). A span's elements are read and written by one thread, so
    // an output that is also an input (in place) only meets loads of its own span, made earlier.
    // Flat 2: col[u] is unit u's column (e mod nu), advanced by stride mod nu a span.
    constexpr std::uint64_t Ahead = Flat == 2 ? (Mask & Laid) : Mask;  // loads issued a span ahead
    constexpr std::uint64_t AtUse = Flat == 2 ? (Mask & ~Laid) : 0;    // broadcast rows, read at use
    [[maybe_unused]] std::uint32_t col[U] = {}, advance = 0;
    const auto load_span = [&](index_t e0, raw_t<S, W>(&v)[U][NL > 0 ? NL : 1]) {
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const index_t e = e0 + u * step;
        if (e < total) load_unit<Ahead, NL, W, true>(v[u], a.ptr, a.inner, e * W);
      }
    };
    index_t e0 = static_cast<index_t>(blockIdx.x) * span + threadIdx.x;
    if (e0 >= total) return;
    if constexpr (Flat == 2) {
      advance = static_cast<std::uint32_t>(stride % nu);
#pragma unroll
      for (int u = 0; u < U; ++u) col[u] = static_cast<std::uint32_t>((e0 + u * step) % nu);
    }
    raw_t<S, W> v[U][NL > 0 ? NL : 1];
    load_span(e0, v);
    for (;;) {
      const index_t e1 = e0 + stride;
      raw_t<S, W> next[U][NL > 0 ? NL : 1];
      if (e1 < total) load_span(e1, next);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const index_t e = e0 + u * step;
        if (e >= total) break;
        if constexpr (AtUse != 0) load_unit<AtUse, NL, W, true>(v[u], a.ptr, a.inner, static_cast<index_t>(col[u]) * W);
        store(v[u], 0, e);
      }
      if (e1 >= total) return;
      e0 = e1;
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int s = 0; s < (NL > 0 ? NL : 1); ++s)
          if (loads_slot(Ahead, s)) v[u][s] = next[u][s];
      if constexpr (Flat == 2) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          col[u] += advance;
          if (col[u] >= nu) col[u] -= static_cast<std::uint32_t>(nu);
        }
      }
    }
  } else {
    for (index_t e0 = static_cast<index_t>(blockIdx.x) * span + threadIdx.x; e0 < total; e0 += stride) {
      raw_t<S, W> v[U][NL > 0 ? NL : 1];
      index_t r[U], ju[U];
      // Unit e's row and column: one division a thread; the next units are `step` further, so
      // where a row is at least that long they carry at most one row. (A 64-bit division is
      // about 20 instructions when both values fit 32 bits, a call otherwise; it was per unit.)
      index_t row = a.rows == 1 ? 0 : e0 / nu, col = e0 - row * nu;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const index_t e = e0 + u * step;
        if (e >= total) break;
        if (u > 0) {
          if (nu >= step) {
            col += step;
            if (col >= nu) col -= nu, ++row;
          } else {
            row = e / nu;
            col = e - row * nu;
          }
        }
        r[u] = row;
        ju[u] = col;
        const S* p[NL > 0 ? NL : 1];
        cpu::row_pointers(a, row, p);
        load_unit<Mask, NL, W>(v[u], p, a.inner, col * W);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        if (e0 + u * step >= total) break;
        store(v[u], r[u], ju[u]);
      }
    }
  }
}

// ScalarBatch (launch.hpp): one thread evaluates each descriptor's one value, in order.
template <class Desc, class Args>
__device__ __forceinline__ void eval_scalar(const Args& a) {
  using S = typename Desc::value_type;
  DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false> ctx;
  init_context(ctx, a);
  set_row(ctx, a, 0);
  a.out[0] = narrow<S>(Desc::out_tree::template eval<compute_t<S>>(ctx, 0));
}
template <class D, class... Rest, class Pack>
__device__ __forceinline__ void eval_scalars(const Pack& q) {
  eval_scalar<D>(q.head);
  if constexpr (sizeof...(Rest) > 0) eval_scalars<Rest...>(q.tail);
}
template <class Batch>
struct eval_batch;
template <class... Descs>
struct eval_batch<ScalarBatch<Descs...>> {
  template <class Pack>
  __device__ __forceinline__ static void run(const Pack& p) {
    eval_scalars<Descs...>(p);
  }
};
template <class Batch>
__global__ void scalar_batch_kernel(const launch_args_t<Batch> pack) {
  await_previous_kernel();
  if (threadIdx.x == 0) eval_batch<Batch>::run(pack);
}
template <class... Descs>
struct ScalarBatchCuda {
  using Args = ArgPack<launch_args_t<Descs>...>;
  static void run(const Args& a, const cpu::LaunchConfig&, cudaStream_t stream, void* = nullptr) {
    launch_after_previous<&scalar_batch_kernel<ScalarBatch<Descs...>>>(1, 32, 0, stream, a);
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

// The Split register path: v, this block's result of stage s, combined with the other blocks'
// of its cluster (the blocks that share the row, at most kRowClusterMax = 16; the lanes of a
// warp read them), so that every block gets the same value. partial: shared memory, a slot
// per stage (each written once: no block overwrites a slot another may still read; the
// kernel's last cluster barrier keeps them alive).
template <ReduceKind K, class T>
__device__ __forceinline__ T cluster_combine(T v, T* partial, int s) {
#if __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) partial[s] = v;
  cluster.sync();
  // Lane q reads block q's value (the reads in parallel: one round trip, not one per block),
  // then the warp's butterfly combines them: the same tree, so the same value, in every warp
  // of every block (its pairwise combines are commutative).
  const int lane = static_cast<int>(threadIdx.x & 31);
  const T r = lane < static_cast<int>(cluster.num_blocks()) ? cluster.map_shared_rank(partial, lane)[s]
                                                            : Reduce<K, 0, false, false>::template identity<T>();
  return warp_reduce<K>(r);
#else
  __trap();  // clusters need sm_90: the host launches Split kernels only on such devices
  return v;
#endif
}

// The row a thread works on: a warp's (WarpPerRow) or its block's; group threads share it,
// this one being number tid among them.
struct RowThread {
  int group, tid;
  index_t row;
};
template <bool WarpPerRow>
__device__ __forceinline__ RowThread row_thread() {
  const int group = WarpPerRow ? 32 : static_cast<int>(blockDim.x);
  const int tid = WarpPerRow ? static_cast<int>(threadIdx.x & 31) : static_cast<int>(threadIdx.x);
  const index_t row = static_cast<index_t>(blockIdx.x) * (blockDim.x / group) + (WarpPerRow ? threadIdx.x >> 5 : 0);
  return {group, tid, row};
}

// Threads per block of the register path (at most): its registers per thread stay launchable.
inline constexpr int kRowRegisterThreads = 256;

// A streamed pass over a row: this thread's units tid, tid + group, ... in that order, each
// given to body(v, ju) with the slots in Mask loaded; up to 4 units' loads (kPointwiseUnits of the
// slots loaded) are issued before the first is used: a long row keeps loads in flight.
template <std::uint64_t Mask, int NL, int W, class Ctx, class Body>
__device__ __forceinline__ void stream_units(const Ctx& ctx, int tid, int group, index_t nu, Body&& body) {
  using S = std::remove_cvref_t<decltype(*ctx.row_ptr[0])>;
  // Fewer units where the pass loads many slots (registers: U x loaded slots 16-byte values).
  constexpr int Loaded = std::popcount(NL >= 64 ? Mask : Mask & ((std::uint64_t{1} << NL) - 1));
  constexpr int U = kPointwiseUnits<Loaded>, NLp = NL > 0 ? NL : 1;
  for (index_t ju0 = tid; ju0 < nu; ju0 += static_cast<index_t>(group) * U) {
    raw_t<S, W> v[U][NLp];
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (ju0 + u * group < nu) load_unit<Mask, NL, W>(v[u], ctx.row_ptr, ctx.inner, (ju0 + u * group) * W);
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (ju0 + u * group < nu) body(v[u], ju0 + u * group);
  }
}

// A row reduction (every stage, then the output) over units of W elements, one row per group of
// threads (a warp, WarpPerRow, or the block). R > 0: the row's units (the loads the stages
// read) are loaded once into registers, R per thread (nu <= R * group), Cached is false. R = 0:
// each tree loads what it reads; Cached: cached stages keep their values in the group's part of
// dynamic shared memory.
// Online: stages Desc::kOnlineFirst and the next (a softmax's max and sum) in one pass over the
// row (lower/online.hpp); streamed without row caches only.
// Split (the register path, a block per part of a row): the row is shared by the blocks of a
// thread-block cluster along x (launched with one), block rank q holding units q * group * R
// and on; each stage's partial results are combined across the cluster (cluster_combine).
template <class Desc, bool Cached, bool WarpPerRow, int W, int R, bool Online, bool Split, class Args>
__global__ void __launch_bounds__(R > 0 ? kRowRegisterThreads : 1024) row_reduce_kernel(const Args a) {
  await_previous_kernel();
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  constexpr int NS = Desc::nstages, NL = Desc::nloads, NLp = NL > 0 ? NL : 1;
  static_assert(R == 0 || !Cached, "kiln: the register path keeps no row caches");
  static_assert(!Online || (R == 0 && !Cached && Desc::kOnlineFirst >= 0), "kiln: online pairs are for streamed rows");
  static_assert(!Split || (R > 0 && !WarpPerRow), "kiln: a split row is the register path's, a block per part");
  __shared__ T scratch[32];
  __shared__ T scratch_sum[Online ? 32 : 1];
  __shared__ T partial[Split && NS > 0 ? NS : 1];
  extern __shared__ unsigned char dyn_smem[];
  RowThread t = row_thread<WarpPerRow>();
  index_t u0 = 0;  // the first unit of the row this block holds (Split), else 0
  if constexpr (Split) {
#if __CUDA_ARCH__ >= 900
    const cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
    t.row = static_cast<index_t>(blockIdx.x) / cluster.num_blocks();
    u0 = static_cast<index_t>(cluster.block_rank()) * t.group * R;
#else
    __trap();
#endif
  }
  const int group = t.group, tid = t.tid;
  const auto unit = [&](int i) { return u0 + tid + static_cast<index_t>(i) * group; };  // the register path's unit i
  if (WarpPerRow && t.row >= a.rows) return;  // whole warps leave; no block barrier follows
  constexpr int NI = Desc::invariants::size;  // row-invariant values, kept after the stages
  DeviceRowContext<S, NL, Desc::nconsts, NS + NI, Cached> ctx;
  init_context(ctx, a);
  set_row(ctx, a, t.row);
  const index_t nu = a.len / W;
  // Kept stage values: in shared memory (Cached), in registers (the register path, for the stages
  // its descriptor keeps), or none.
  constexpr bool InRegisters = R > 0 && Desc::kCachedStages > 0;
  using Cache = std::conditional_t<Cached, SharedRowCache<T>,
                                   std::conditional_t<InRegisters, RegisterRowCache<T, NS, R, W>, NoRowCache>>;
  T regcache[InRegisters ? NS : 1][InRegisters ? R : 1][InRegisters ? W : 1];
  Cache cache{};
  if constexpr (InRegisters) cache = Cache{regcache};
  if constexpr (Cached) {
    T* base = reinterpret_cast<T*>(dyn_smem) + (WarpPerRow ? (threadIdx.x >> 5) * a.len * Desc::kCachedStages : 0);
    int k = 0, s = 0;
    [&]<class... Ss>(lower::TypeList<Ss...>) { ((ctx.cache[s++] = Ss::cached ? base + (k++) * a.len : nullptr), ...); }(
        typename Desc::stages{});
    cache = Cache{ctx.cache, nu};
  }
  raw_t<S, W> reg[R > 0 ? R : 1][NLp];
  if constexpr (R > 0) {
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (unit(i) < nu) load_unit<stage_loads<typename Desc::stages>::value, NL, W>(reg[i], ctx.row_ptr, ctx.inner, unit(i) * W);
  }
  [&]<class... Ss, int... I>(lower::TypeList<Ss...>, std::integer_sequence<int, I...>) {
    (([&] {
       using St = Ss;
       constexpr int s = I;
       using Op = Reduce<St::kind, 0, false, false>;
       const index_t n = a.stage_len[s], nus = n / W;  // W > 1: every stage spans the row
       if constexpr (Online && s == Desc::kOnlineFirst + 1) {
         return;  // computed with stage s - 1
       } else if constexpr (Online && s == Desc::kOnlineFirst) {
         T m = -std::numeric_limits<T>::infinity(), d = T(0);
         stream_units<lower::tree_loads<typename St::tree, false>::value, NL, W>(
             ctx, tid, group, nus, [&](const raw_t<S, W>(&v)[NLp], index_t ju) {
               online_unit<typename St::tree, S, NL, W>(m, d, v, ctx.consts, ctx.stages, ju);
             });
         if constexpr (WarpPerRow) warp_online<significand_bits<S>>(m, d);
         else block_online<significand_bits<S>>(m, d, scratch, scratch_sum);
         // An infinite maximum: the two-pass sum is NaN (e^(inf - inf) for a +inf entry, or every
         // entry -inf), where the pair kept a count; give the same NaN. An empty row keeps d = 0.
         if (isinf(m) && d != T(0)) d = std::numeric_limits<T>::quiet_NaN();
         ctx.stages[s] = m;
         ctx.stages[s + 1] = d;
         return;
       } else {
         T acc = Op::template identity<T>();
         if constexpr (R > 0) {
#pragma unroll
           for (int i = 0; i < R; ++i)
             if (unit(i) < nus)
               acc = reduce_unit<typename St::tree, St::kind, InRegisters && St::cached, S, NL, W>(
                   acc, reg[i], ctx.consts, ctx.stages, cache, s, unit(i), i);
         } else {
           stream_units<lower::tree_loads<typename St::tree, Cached>::value, NL, W>(
               ctx, tid, group, nus, [&](const raw_t<S, W>(&v)[NLp], index_t ju) {
                 acc = reduce_unit<typename St::tree, St::kind, Cached && St::cached, S, NL, W>(acc, v, ctx.consts,
                                                                                               ctx.stages, cache, s, ju);
               });
         }
         acc = WarpPerRow ? warp_reduce<St::kind>(acc) : block_reduce<St::kind>(acc, scratch);
         if constexpr (Split) acc = cluster_combine<St::kind>(acc, partial, s);
         ctx.stages[s] = Op::template finish<T>(acc, n);
       }
     }()),
     ...);
  }(typename Desc::stages{}, std::make_integer_sequence<int, NS>{});
  [&]<class... Is>(lower::TypeList<Is...>) {
    int i = NS;
    ((ctx.stages[i++] = Is::template eval<T>(ctx, 0)), ...);
  }(typename Desc::invariants{});
  S* out = a.out + t.row * a.len;
  if constexpr (R > 0) {
    constexpr std::uint64_t OutOnly =
        lower::tree_loads<typename Desc::out_tree, false>::value & ~stage_loads<typename Desc::stages>::value;
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const index_t ju = unit(i);
      if (ju >= nu) continue;
      load_unit<OutOnly, NL, W>(reg[i], ctx.row_ptr, ctx.inner, ju * W);
      store_unit<typename Desc::out_tree, S, NL, W>(out, reg[i], ctx.consts, ctx.stages, cache, ju, i);
    }
  } else {
    stream_units<lower::tree_loads<typename Desc::out_tree, Cached>::value, NL, W>(
        ctx, tid, group, nu, [&](const raw_t<S, W>(&v)[NLp], index_t ju) {
          store_unit<typename Desc::out_tree, S, NL, W>(out, v, ctx.consts, ctx.stages, cache, ju);
        });
  }
#if __CUDA_ARCH__ >= 900
  // Split: the other blocks may still read this one's partial results.
  if constexpr (Split && NS > 0) cooperative_groups::this_cluster().sync();
#endif
}

// Units a thread of the register path holds.
inline constexpr int kRowRegisterUnits = 4;
// Blocks a split row may span (the cluster's size; above 8, Hopper's non-portable sizes).
inline constexpr int kRowClusterMax = 16;

template <class T, class Out, class... Stages, int NL, int NC, class A, class E>
struct RowKernelCuda<lower::RowKernel<T, Out, lower::TypeList<Stages...>, NL, NC, A, E>> {
  using Desc = lower::RowKernel<T, Out, lower::TypeList<Stages...>, NL, NC, A, E>;
  static constexpr int NS = sizeof...(Stages), NE = E::size;
  static constexpr int W = sizeof(T) <= 4 ? 16 / static_cast<int>(sizeof(T)) : 1;  // 16-byte units (f64: elements)
  using Args = cpu::row_args_t<T, NL, NC, NS, NE>;
  // Row reductions: the output tree's row-invariant subtrees (a layer norm's rsqrt(var + eps))
  // are evaluated once per row, after the stages, into stages NS, NS + 1, ...
  template <class Stages_, class OutTree>
  struct RowDesc : Desc {
    using stages = Stages_;
    using hoisted = lower::hoist_invariants<OutTree, NS>;
    using out_tree = typename hoisted::type;
    using invariants = typename hoisted::list;
    static constexpr int kCachedStages = []<class... Ss>(lower::TypeList<Ss...>) { return (0 + ... + Ss::cached); }(Stages_{});
    static constexpr int kOnlineFirst = lower::online_first<Stages_, A>::value;  // -1: no online pair
  };
  using DescEx = RowDesc<lower::TypeList<Stages...>, Out>;
  // The register path reads a node's values once: slots that load the same node as an earlier
  // one read that one (SlotAlias; checked at run time by aliases_hold). It keeps, in registers,
  // the values of the stages the output tree reads (softmax's exponentials, layer norm's x + r);
  // other kept values are recomputed from the row's registers where read.
  static constexpr std::uint64_t kOutReads = []<int... I>(std::integer_sequence<int, I...>) {
    return (std::uint64_t{0} | ... | (lower::reads_cached<Out, I>::value ? std::uint64_t{1} << I : 0));
  }(std::make_integer_sequence<int, NS>{});
  using RegisterDesc =
      RowDesc<typename lower::keep_cached<typename lower::remap_slots<lower::TypeList<Stages...>, A>::type, kOutReads>::type,
              typename lower::keep_cached<typename lower::remap_slots<Out, A>::type, kOutReads>::type>;

  // The slots A aliases hold the same values: same pointer and strides (their iteration spaces
  // have the same shape).
  static bool aliases_hold(const Args& a) {
    for (int k = 0; k < NL; ++k) {
      const int j = A::of(k);
      if (j == k) continue;
      if (a.ptr[k] != a.ptr[j] || a.inner[k] != a.inner[j]) return false;
      for (int d = 0; d < a.nrow_dims; ++d)
        if (a.outer[k][d] != a.outer[j][d]) return false;
    }
    return true;
  }

  // 16-byte units apply: every load has inner stride 0 or 1, rows are whole units, pointers are
  // 16-byte aligned, and (row reductions) every stage spans the row.
  static bool vectorizable(const Args& a) {
    if constexpr (W == 1) return false;
    if (a.len % W != 0 || reinterpret_cast<std::uintptr_t>(a.out) % 16 != 0) return false;
    if constexpr (NE > 0)
      for (int e = 0; e < NE; ++e)
        if (reinterpret_cast<std::uintptr_t>(a.extra_out[e]) % 16 != 0) return false;
    for (int s = 0; s < NL; ++s) {
      if (a.inner[s] != 0 && a.inner[s] != 1) return false;
      if (a.inner[s] == 1) {
        if (reinterpret_cast<std::uintptr_t>(a.ptr[s]) % 16 != 0) return false;
        for (int d = 0; d < a.nrow_dims; ++d)
          if (a.outer[s][d] % W != 0) return false;
      }
    }
    for (int s = 0; s < NS; ++s)
      if (a.stage_len[s] != a.len) return false;
    return true;
  }

  template <bool Cached, bool WarpPerRow, int U, int R, bool Online = false>
  static void reduce(const Args& a, unsigned blocks, int threads, std::size_t smem, cudaStream_t stream) {
    using D = std::conditional_t<(R > 0), RegisterDesc, DescEx>;
    launch_after_previous<&row_reduce_kernel<D, Cached, WarpPerRow, U, R, Online, false, Args>>(blocks, static_cast<unsigned>(threads),
                          smem, stream, a);
  }

  // The register path for rows of nu units, longer than a block holds (kRowRegisterThreads x
  // R): each row split over `ranks` blocks of kRowRegisterThreads threads (a cluster; the
  // fewest, a power of two). False where it cannot run here: a row too long for kRowClusterMax
  // blocks, no clusters (before Hopper), code not compiled for sm_90, too many blocks, or a
  // cluster the device cannot place or refuses (asked once per device and size; errors are
  // cleared); the caller streams the rows then.
  template <int R>
  static bool reduce_split(const Args& a, index_t nu, cudaStream_t stream) {
    auto* const kernel = &row_reduce_kernel<RegisterDesc, false, false, W, R, false, true, Args>;
    constexpr int group = kRowRegisterThreads;
    if (nu > index_t{group} * R * kRowClusterMax) return false;
    int ranks = 2;
    while (index_t{ranks} * group * R < nu) ranks *= 2;
    if (!device_has_clusters() || a.rows * ranks > index_t{1} << 30) return false;
    const dim3 blocks(static_cast<unsigned>(a.rows * ranks)), threads(group), cluster(static_cast<unsigned>(ranks));
    static thread_local std::map<std::pair<int, int>, bool> runs;  // (device, ranks)
    const auto key = std::make_pair(current_device(), ranks);
    auto it = runs.find(key);
    if (it == runs.end()) {
      // Asked without a stream (a capturing stream is not to be touched by queries).
      const KernelLaunch query(blocks, threads, 0, nullptr, cluster, false);
      int clusters = 0;
      bool ok = code_arch(kernel) >= 90;
      if (ok && ranks > 8) ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
      ok = ok && cudaOccupancyMaxActiveClusters(&clusters, kernel, &query.config) == cudaSuccess && clusters > 0;
      if (!ok) (void)cudaGetLastError();  // a refused size is not an error of the call
      it = runs.emplace(key, ok).first;
    }
    if (!it->second) return false;
    const KernelLaunch launch(blocks, threads, 0, stream, cluster, true);  // code_arch >= 90 held above
    KILN_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, a));
    return true;
  }
  // Streamed rows: without row caches, a softmax's max and sum are one pass (online) where the
  // two stages read the same values (SlotAlias holds) over the same length.
  template <int U>
  static void reduce_streamed(const Args& a, bool warp, bool cached, unsigned blocks, int threads, std::size_t smem,
                              cudaStream_t stream) {
    if constexpr (DescEx::kOnlineFirst >= 0) {
      constexpr int f = DescEx::kOnlineFirst;
      if (!cached && a.stage_len[f] == a.stage_len[f + 1] && aliases_hold(a)) {
        if (warp) reduce<false, true, U, 0, true>(a, blocks, threads, 0, stream);
        else reduce<false, false, U, 0, true>(a, blocks, threads, 0, stream);
        return;
      }
    }
    if (warp) {
      if (cached) reduce<true, true, U, 0>(a, blocks, threads, smem, stream);
      else reduce<false, true, U, 0>(a, blocks, threads, 0, stream);
    } else {
      if (cached) reduce<true, false, U, 0>(a, blocks, threads, smem, stream);
      else reduce<false, false, U, 0>(a, blocks, threads, 0, stream);
    }
  }

  // Pointwise, in units of V elements: a block per span of threads x kPointwiseUnits units, or
  // in the flat case (pointwise_flat) with 16-byte units the blocks an SM holds at once
  // (occupancy, asked once per kernel, block size and device), each looping over spans with the
  // next span's loads issued before this one's maths (the kernel's pipelined path). Element
  // loads (rare: unaligned or odd lengths) always take the general kernel. On the H200, W1 back to back in
  // bench_gpu: f32 0.148 ms this way, 0.157 with a block per span of 128 threads, 0.171 with
  // the twelfth session's kernel; a single launch timed alone favours the block per span
  // (0.138 ms), which is why MaxAutotune times candidates as calls run them.
  template <int V>
  static index_t pointwise_blocks(const Args& a, int threads) {
    const index_t work = a.rows * a.len / V, span = static_cast<index_t>(threads) * kPointwiseUnits<NL>;
    return std::min<index_t>((work + span - 1) / span, index_t{1} << 20);
  }
  // A flat kernel's launch: at most the blocks the SMs hold at once.
  template <auto Kernel>
  static void launch_resident(index_t blocks, int threads, cudaStream_t stream, const Args& a) {
    thread_local std::map<std::pair<int, int>, int> resident;  // (device, threads): blocks an SM holds
    const auto key = std::make_pair(current_device(), threads);
    auto it = resident.find(key);
    if (it == resident.end()) {
      int n = 0;
      KILN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, Kernel, threads, 0));
      it = resident.emplace(key, std::max(n, 1)).first;
    }
    const index_t resident_blocks = std::min<index_t>(blocks, static_cast<index_t>(it->second) * multiprocessors());
    launch_after_previous<Kernel>(static_cast<unsigned>(resident_blocks), static_cast<unsigned>(threads), 0, stream, a);
  }
  template <int V>
  static void pointwise(const Args& a, int threads, cudaStream_t stream) {
    if constexpr (V > 1) {
      if (pointwise_flat<Desc>(a))
        return launch_resident<&pointwise_kernel<Desc, V, 1, Args>>(pointwise_blocks<V>(a, threads), threads, stream, a);
    }
    launch_general<V>(a, threads, stream);
  }
  template <int V>
  static void launch_general(const Args& a, int threads, cudaStream_t stream) {
    launch_after_previous<&pointwise_kernel<Desc, V, 0, Args>>(static_cast<unsigned>(pointwise_blocks<V>(a, threads)),
                                                                  static_cast<unsigned>(threads), 0, stream, a);
  }

  // The flat case over several rows (pointwise kernel 2): the output is contiguous rows x len,
  // the loads in Laid that the kernel reads are laid out as the output and the others one row
  // broadcast over the rows (a GEMM epilogue's bias). Columns are carried in 32 bits.
  // One row is the case where every load is both (kernel 1's, which epilogues leave to this one).
  template <std::uint64_t Laid>
  static bool pointwise_rows_flat(const Args& a) {
    if (a.rows < 1 || (a.rows > 1 && a.nrow_dims < 1) || a.len / W >= (index_t{1} << 31)) return false;
    for (int s = 0; s < NL; ++s) {
      if (!loads_slot(pointwise_loads<Desc>, s)) continue;
      if (a.inner[s] != 1) return false;
      if (a.rows == 1) continue;
      const bool laid = loads_slot(Laid, s);
      index_t stride = a.len;
      for (int d = a.nrow_dims - 1; d >= 0; --d) {
        if (a.outer[s][d] != (laid ? stride : 0)) return false;
        stride *= a.row_dims[d];
      }
    }
    return true;
  }

  // A GEMM's epilogue (cuda::GemmEpilogue; in place over the product, load Acc; no stages): where
  // every other load it reads is a bias broadcast over the product's rows (or the product is one
  // row), the flat kernel that reads those at each unit's column (pointwise kernel 2); else the
  // general kernel that finds each unit's row and column. W4's exact gelu(acc + b) over
  // [4096, 3072] is one. Kernel 1 (run()'s one-row case) is not instantiated for epilogues: a
  // kernel fewer to build per GEMM epilogue.
  template <int Acc>
  static void run_epilogue(const Args& a, const cpu::LaunchConfig& cfg, cudaStream_t stream) {
    static_assert(NS == 0 && NE == 0, "kiln: a GEMM epilogue is pointwise, without extra outputs");
    if (a.rows == 0 || a.len == 0) return;
    const int threads = block_threads(cfg);
    if constexpr (W > 1 && Acc < 64) {
      if (cfg.chunks != 1 && vectorizable(a)) {
        constexpr std::uint64_t Laid = std::uint64_t{1} << Acc;
        if (pointwise_rows_flat<Laid>(a))
          return launch_resident<&pointwise_kernel<Desc, W, 2, Args, Laid>>(pointwise_blocks<W>(a, threads), threads, stream, a);
        return launch_general<W>(a, threads, stream);
      }
    }
    launch_general<1>(a, threads, stream);
  }

  static int block_threads(const cpu::LaunchConfig& cfg) { return cfg.threads > 0 ? cfg.threads : 256; }

  // config.threads: threads per block (0: 256). Row reductions: config.chunks 0 kiln's choice
  // (registers where the row fits, else streamed 16-byte units, else elements), 1 element loads,
  // 2 streamed 16-byte units; config.variant for the streamed paths: 1 a warp per row, 2 a
  // block per row (0: by the row's length). Pointwise: config.chunks 1 element loads.
  static void run(const Args& a, const cpu::LaunchConfig& cfg, cudaStream_t stream, void* = nullptr) {
    if (a.rows == 0 || a.len == 0) return;
    const int threads = block_threads(cfg);
    const bool vec = cfg.chunks != 1 && vectorizable(a);
    if constexpr (NS == 0) {
      if (vec) pointwise<W>(a, threads, stream);
      else pointwise<1>(a, threads, stream);
    } else {
      constexpr int R = kRowRegisterUnits;
      const index_t nu = a.len / W;
      const bool registers = vec && cfg.chunks == 0 && aliases_hold(a);
      if (registers && nu <= kRowRegisterThreads * R) {
        // The register path: a warp per row where the row fits 32 x R units, else a block of
        // the fewest warps (a power of two) that holds it.
        if (nu <= 32 * R) {
          const int rows_per_block = std::min(threads, kRowRegisterThreads) / 32;
          reduce<false, true, W, R>(a, static_cast<unsigned>((a.rows + rows_per_block - 1) / rows_per_block),
                                    32 * rows_per_block, 0, stream);
        } else {
          int group = 64;
          while (group * R < nu) group *= 2;
          reduce<false, false, W, R>(a, static_cast<unsigned>(a.rows), group, 0, stream);
        }
      } else if (!(registers && reduce_split<R>(a, nu, stream))) {
        const bool warp = cfg.variant == 1 || (cfg.variant == 0 && a.len <= kWarpRowMax);
        const int rows_per_block = warp ? threads / 32 : 1;
        const std::size_t cache_bytes =
            static_cast<std::size_t>(DescEx::kCachedStages) * a.len * sizeof(compute_t<T>) * rows_per_block;
        const bool cached = DescEx::kCachedStages > 0 && a.row_cache && cache_bytes <= kRowCacheBytes;
        const auto blocks = static_cast<unsigned>((a.rows + rows_per_block - 1) / rows_per_block);
        if (vec) reduce_streamed<W>(a, warp, cached, blocks, threads, cached ? cache_bytes : 0, stream);
        else reduce_streamed<1>(a, warp, cached, blocks, threads, cached ? cache_bytes : 0, stream);
      }
    }
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
