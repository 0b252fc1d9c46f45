// kiln: the row kernel on CUDA (pointwise and row-reduction kinds): the dispatcher that picks,
// per lowered RowKernel descriptor and per call's shapes, which __global__ template to launch
// (pointwise_kernel.cuh, row_reduce_kernel.cuh) and with which unit width, layout and block.
// Arguments are the shared vocabulary's RowArgs (lower/args.hpp), passed by value (trivially
// copyable: pointers, strides, extents, scalars).
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
#include <unordered_map>
#include <vector>

#include "kiln/backend/cuda/pointwise_kernel.cuh"
#include "kiln/backend/cuda/row_reduce_kernel.cuh"

namespace kiln::cuda {

inline constexpr index_t kWarpRowMax = 2048;     // rows up to this length: a warp per row
inline constexpr std::size_t kRowCacheBytes = 40 * 1024;  // cached stages; under the 48 KiB a block gets without opt-in

template <class Desc>
struct RowKernelCuda;

template <class T, class Out, class... Stages, int NL, int NC, class A, class E>
struct RowKernelCuda<lower::RowKernel<T, Out, lower::TypeList<Stages...>, NL, NC, A, E>> {
  using Desc = lower::RowKernel<T, Out, lower::TypeList<Stages...>, NL, NC, A, E>;
  static constexpr int NS = sizeof...(Stages), NE = E::size;
  static constexpr int W = sizeof(T) <= 4 ? 16 / static_cast<int>(sizeof(T)) : 1;  // 16-byte units (f64: elements)
  using Args = lower::row_args_t<T, NL, NC, NS, NE>;
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
    constexpr auto kernel = &row_reduce_kernel<RegisterDesc, false, false, W, R, false, true, Args>;
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
      bool ok = kernel_attributes<kernel>().ptxVersion >= 90;
      if (ok && ranks > 8) ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
      ok = ok && cudaOccupancyMaxActiveClusters(&clusters, kernel, &query.config) == cudaSuccess && clusters > 0;
      if (!ok) (void)cudaGetLastError();  // a refused size is not an error of the call
      it = runs.emplace(key, ok).first;
    }
    if (!it->second) return false;
    const KernelLaunch launch(blocks, threads, 0, stream, cluster, true);  // sm_90 code, checked above
    launch_kernel<kernel>(launch, a);
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
  // loads (rare: unaligned or odd lengths) always take the general kernel. On the H200, a
  // 2^28-element gelu-like chain back to back in
  // bench_gpu: f32 0.148 ms this way, 0.157 with a block per span of 128 threads, 0.171 with
  // an earlier non-pipelined kernel; a single launch timed alone favours the block per span
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
  // general kernel that finds each unit's row and column. an exact gelu(acc + b) over
  // [4096, 3072] is one. Kernel 1 (run()'s one-row case) is not instantiated for epilogues: a
  // kernel fewer to build per GEMM epilogue.
  template <int Acc>
  static void run_epilogue(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream) {
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

  static int block_threads(const lower::LaunchConfig& cfg) { return cfg.threads > 0 ? cfg.threads : 256; }

  // config.threads: threads per block (0: 256). Row reductions: config.chunks 0 kiln's choice
  // (registers where the row fits, else streamed 16-byte units, else elements), 1 element loads,
  // 2 streamed 16-byte units; config.variant for the streamed paths: 1 a warp per row, 2 a
  // block per row (0: by the row's length). Pointwise: config.chunks 1 element loads.
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void* = nullptr) {
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
