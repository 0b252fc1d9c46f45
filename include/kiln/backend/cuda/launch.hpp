// kiln: the interface between the host side of the CUDA backend (planning, cuBLASLt, graphs,
// built by any C++ compiler) and its kernels (__global__ templates, built by nvcc).
//
// cuda::launch<Desc>(args, config, stream, scratch) launches the kernel of one lowered
// descriptor (a row, reduce or reduce-to kernel; a GEMM's epilogue is a row kernel). It is
// defined in kernels.cuh. A translation unit built by nvcc includes that and instantiates the
// kernels itself. One built by g++ with KILN_CUDA_KERNELS only declares it: the build
// (kiln_cuda_executable in CMake, cmake/kiln_cuda_kernels.py) lists the launch<Desc> symbols
// its objects leave undefined and compiles their explicit instantiations with nvcc. Either
// way nvcc sees only name-free descriptor types, and the host-side planning, heavy constexpr
// work that nvcc's front end is slow at, can stay with g++ (docs/cuda.md, "Builds").
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "kiln/backend/cuda/runtime.hpp"
#include "kiln/expr/ops/reduce.hpp"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

// The argument struct of each launchable descriptor: the shared vocabulary's (lower/args.hpp),
// passed by value; the CUDA backend's own launch descriptors (below, gemm.hpp) add theirs.
template <class Desc>
struct kernel_args {
  using type = lower::args_t<Desc>;
};
template <class Desc>
using launch_args_t = typename kernel_args<Desc>::type;

// Several kernels that each compute one value from a call's inputs (AdamW's bias corrections
// per parameter, say), launched as one: a kernel launch costs more than such a value, and a
// graph replays one node instead of a dozen. Each Desc is a row kernel without stages whose
// output has rank 0. Arguments: each one's, in order (a plain aggregate, trivially copyable).
template <class... Descs>
struct ScalarBatch {};
template <class... As>
struct ArgPack {};
template <class A, class... Rest>
struct ArgPack<A, Rest...> {
  A head;
  ArgPack<Rest...> tail;
};
template <class... Descs>
struct kernel_args<ScalarBatch<Descs...>> {
  using type = ArgPack<launch_args_t<Descs>...>;
};

template <class Desc>
void launch(const launch_args_t<Desc>& args, const lower::LaunchConfig& config, cudaStream_t stream, void* scratch);

// Host-side facts about each kind, needed before a launch.
inline constexpr int kTotalBlocks = 1024;  // a total reduction's partials

// Attention's decode path: few query rows per key/value head (q_len times the group's query
// heads, at most kDecodeRows) against a cache longer than one chunk. The cache is split into
// chunks of kDecodeChunk keys, a block each (split-K), and a second kernel combines the chunks'
// partial softmax sums, which the kernel's scratch holds: per query row and chunk, the Dv
// weighted sums, the max and the sum. Returns the number of chunks, or 0 off that path.
inline constexpr index_t kDecodeChunk = 256, kDecodeRows = 16;
template <class Args>
index_t decode_chunks(const Args& a) {
  const index_t group = a.kv_heads > 0 ? a.heads / a.kv_heads : 1;
  if (a.q_len * group > kDecodeRows || a.head_dim > 256 || a.v_dim > 256 || a.head_dim == 0 || a.v_dim == 0 ||
      a.kv_len <= kDecodeChunk)
    return 0;
  return (a.kv_len + kDecodeChunk - 1) / kDecodeChunk;
}

// ReduceTo summing every row into one value per column (a bias's or a layer norm's weight
// gradient: [rows, n] -> [n]): a block sums 32 columns over a share of the rows, so a short row
// (n of a few hundred) has few column tiles; the rows are split over enough blocks to fill the
// device twice over, each split at least kReduceToSplitRows rows. A second kernel adds the
// splits' partial sums (the kernel's scratch, [splits][n]) in a fixed order: the result does not
// depend on timing. Returns the number of splits (1: no scratch, no second kernel), or 0 when
// the reduction is not of that form.
inline constexpr index_t kReduceToSplitRows = 64, kReduceToMaxSplits = 128;
template <class Args>
bool reduce_to_columns(const Args& a) {
  bool columns = a.out_inner != 0;
  for (int d = 0; d < a.nrow_dims; ++d) columns = columns && a.out_outer[d] == 0;
  return columns;
}
template <class Args>
index_t reduce_to_splits(const Args& a) {
  if (!reduce_to_columns(a)) return 0;
  const index_t tiles = (a.len + 31) / 32, want = (2 * index_t{multiprocessors()} + tiles - 1) / tiles;
  return std::clamp<index_t>(std::min(want, a.rows / kReduceToSplitRows), 1, kReduceToMaxSplits);
}
template <class D>
inline constexpr bool is_reduce_to = false;
template <class T, class Tree, int NL, int NC>
inline constexpr bool is_reduce_to<lower::ReduceToKernel<T, Tree, NL, NC>> = true;

// The scratch a kernel needs for its plan's arguments: a total reduction's partials, a
// reduce-to's column partials, a 16-bit scatter_add_rows's float sums, the decode path's partial
// sums of attention.
template <class Desc>
std::size_t scratch_bytes(const launch_args_t<Desc>& args) {
  using C = compute_t<typename Desc::value_type>;
  if constexpr (requires { Desc::total; }) return Desc::total ? kTotalBlocks * sizeof(C) : 0;
  else if constexpr (is_reduce_to<Desc>) {
    const index_t splits = reduce_to_splits(args);
    return splits > 1 ? static_cast<std::size_t>(splits * args.len) * sizeof(C) : 0;
  }
  else if constexpr (requires { Desc::part_kind; })
    return Desc::part_kind == AttentionPart::Out
               ? static_cast<std::size_t>(decode_chunks(args) * args.batch * args.heads * args.q_len * (args.v_dim + 2)) * sizeof(C)
               : 0;
  else if constexpr (requires { Desc::scatter; })
    return Desc::scatter && !std::is_same_v<C, typename Desc::value_type>
               ? static_cast<std::size_t>(args.table_rows * args.len) * sizeof(C)
               : 0;
  else return 0;
}

// MaxAutotune's candidates: threads per block; for row kernels the load path (chunks 0: kiln's
// choice, 1: element loads, 2 for row reductions: streamed 16-byte units), and for the streamed
// row-reduction paths a warp (variant 1) or a block (variant 2) per row. The register path
// sizes its own groups, so it is tried once per block size.
template <class Desc>
std::vector<lower::LaunchConfig> candidates() {
  std::vector<lower::LaunchConfig> c;
  for (int t : {128, 256, 512}) {
    if constexpr (requires { typename Desc::stages; }) {
      if constexpr (Desc::nstages > 0) {
        c.push_back({t, 0, 0, 0});
        for (int chunks : {1, 2}) {
          c.push_back({t, chunks, 1, 0});
          c.push_back({t, chunks, 2, 0});
        }
      } else {
        for (int chunks : {0, 1}) c.push_back({t, chunks, 0, 0});
      }
    } else {
      c.push_back({t, 0, 0, 0});
    }
  }
  return c;
}

}  // namespace kiln::cuda
