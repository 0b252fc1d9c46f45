// kiln: reductions on CUDA over the CPU backend's argument structs.
//   AxisReduce: a thread per output element (coalesced along the last axis), looping over the
//     reduced axis.
//   TotalReduce: two launches, partials per block then one block combining them in a fixed
//     order, so the result does not depend on timing.
//   ReduceTo (the adjoint of broadcasting): 32 outputs per block, Y threads per output each
//     summing a share of the input elements that broadcast from it; the shares are added in a
//     fixed order. Column sums of many rows split the rows over blocks too (reduce_to_splits),
//     and a second kernel adds the splits in a fixed order.
#pragma once
#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/row_kernel.cuh"

namespace kiln::cuda {

// S: the storage type of loads and output; T: the compute type of every accumulator.
template <class Desc, class Args>
__global__ void axis_reduce_kernel(const Args a, index_t out_rows) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  using Op = Reduce<Desc::kind, 0, false, false>;
  const index_t e = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= out_rows * a.len) return;
  const index_t out_row = e / a.len, j = e - out_row * a.len;
  index_t axis_stride;
  const index_t base_row = lower::axis_base_row(a, out_row, axis_stride);
  DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false> ctx;
  init_context(ctx, a);
  T acc = Op::template identity<T>();
  const index_t n = a.row_dims[a.axis];
  for (index_t k = 0; k < n; ++k) {
    set_row(ctx, a, base_row + k * axis_stride);
    acc = combine<Desc::kind>(acc, Desc::tree::template eval<T>(ctx, j));
  }
  a.out[e] = narrow<S>(Op::template finish<T>(acc, n));
}

inline constexpr int kTotalThreads = 256;

// Stage 1: block b reduces elements [b*chunk, (b+1)*chunk) of rows x len into partial[b].
template <class Desc, class Args>
__global__ void total_partial_kernel(const Args a, compute_t<typename Desc::value_type>* partial, index_t chunk) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  using Op = Reduce<Desc::kind, 0, false, false>;
  __shared__ T scratch[32];
  DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false> ctx;
  init_context(ctx, a);
  const index_t total = a.rows * a.len, e0 = blockIdx.x * chunk, e1 = e0 + chunk < total ? e0 + chunk : total;
  T acc = Op::template identity<T>();
  index_t cur_row = -1;
  for (index_t e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
    const index_t r = e / a.len, j = e - r * a.len;
    if (r != cur_row) set_row(ctx, a, cur_row = r);
    acc = combine<Desc::kind>(acc, Desc::tree::template eval<T>(ctx, j));
  }
  acc = block_reduce<Desc::kind>(acc, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}
// Stage 2: one block combines the partials and finishes (mean divides by the count).
template <class Desc>
__global__ void total_finish_kernel(const compute_t<typename Desc::value_type>* partial, int n,
                                    typename Desc::value_type* out, index_t count) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  using Op = Reduce<Desc::kind, 0, false, false>;
  __shared__ T scratch[32];
  T acc = Op::template identity<T>();
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc = combine<Desc::kind>(acc, partial[i]);
  acc = block_reduce<Desc::kind>(acc, scratch);
  if (threadIdx.x == 0) out[0] = narrow<S>(Op::template finish<T>(acc, count));
}

template <class Desc>
struct ReduceKernelCuda;
template <class T, ReduceKind K, class Tree, bool Total, int NL, int NC>
struct ReduceKernelCuda<lower::ReduceKernel<T, K, Tree, Total, NL, NC>> {
  using Desc = lower::ReduceKernel<T, K, Tree, Total, NL, NC>;
  using Args = lower::args_t<Desc>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void* scratch) {
    const int threads = cfg.threads > 0 ? cfg.threads : kTotalThreads;
    if constexpr (Total) {
      const index_t total = a.rows * a.len;
      const index_t chunk = std::max<index_t>((total + kTotalBlocks - 1) / kTotalBlocks, 1);
      const int blocks = static_cast<int>(std::max<index_t>((total + chunk - 1) / chunk, 1));
      auto* partial = static_cast<compute_t<T>*>(scratch);
      launch_after_previous<&total_partial_kernel<Desc, Args>>(blocks, static_cast<unsigned>(threads), 0, stream, a, partial, chunk);
      KILN_CUDA_CHECK(cudaGetLastError());
      launch_after_previous<&total_finish_kernel<Desc>>(1, 256, 0, stream, partial, blocks, a.out, total);
    } else {
      index_t out_rows = 1;
      for (int d = 0; d < a.nrow_dims; ++d)
        if (d != a.axis) out_rows *= a.row_dims[d];
      const index_t n = out_rows * a.len;
      if (n == 0) return;
      launch_after_previous<&axis_reduce_kernel<Desc, Args>>(static_cast<unsigned>((n + threads - 1) / threads),
                            static_cast<unsigned>(threads), 0, stream, a, out_rows);
    }
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

// ReduceTo: output element o sums the input elements (row, j) that broadcast from it. The
// input's row dims and last axis are split into kept ones (out stride != 0) and summed ones.
// A block is X x Y threads: threadIdx.x picks one of X consecutive outputs (consecutive
// columns when the last axis is kept, so loads coalesce), threadIdx.y strides over the summed
// elements; the Y partial sums are added in a fixed order. X is 32 for column sums; the
// general path takes Y from the elements each output sums (1 where it sums one: a copy).
// Columns: every row dim is summed and the last axis kept (a bias's gradient, [rows, n] ->
// [n]): output o is column o, and thread y sums rows y, y + Y, ... of its block's split
// (blockIdx.y of gridDim.y) with no index arithmetic beyond the row's pointers (the general
// path's per-element divisions by each extent cost more than the loads: 22 us for a
// [256, 1024] -> [1024] sum, measured with profile()). With more than one split each block
// writes its sums to splits[blockIdx.y][o], and reduce_to_finish_kernel adds them.
inline constexpr int kReduceToColumns = 32;

template <class Desc, bool Columns, class Args>
__global__ void reduce_to_kernel(const Args a, compute_t<typename Desc::value_type>* splits) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  using S = typename Desc::value_type;
  using T = compute_t<S>;
  extern __shared__ unsigned char reduce_to_smem[];
  T* partial = reinterpret_cast<T*>(reduce_to_smem);  // [Y][X]
  const index_t o = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (Columns) {
    const index_t share = (a.rows + gridDim.y - 1) / gridDim.y, first = blockIdx.y * share;
    const index_t end = first + share < a.rows ? first + share : a.rows;
    T acc = T(0);
    if (o < a.len) {
      DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false> ctx;
      init_context(ctx, a);
#pragma unroll 4
      for (index_t r = first + threadIdx.y; r < end; r += blockDim.y) {
        set_row(ctx, a, r);
        acc += Desc::tree::template eval<T>(ctx, o);
      }
    }
    partial[threadIdx.y * blockDim.x + threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y != 0 || o >= a.len) return;
    for (unsigned y = 1; y < blockDim.y; ++y) acc += partial[y * blockDim.x + threadIdx.x];
    if (gridDim.y == 1) a.out[o * a.out_inner] = narrow<S>(acc);
    else splits[blockIdx.y * a.len + o] = acc;
    return;
  }
  const int nd = a.nrow_dims;  // dims 0..nd-1 are row dims, nd the last axis
  auto extent = [&](int d) { return d < nd ? a.row_dims[d] : a.len; };
  auto kept = [&](int d) { return (d < nd ? a.out_outer[d] : a.out_inner) != 0; };
  index_t idx[kMaxRank + 1] = {};
  T acc = T(0);
  if (o < a.out_numel) {
    index_t rest = o, summed = 1;
    for (int d = nd; d >= 0; --d) {
      if (kept(d)) {
        idx[d] = rest % extent(d);
        rest /= extent(d);
      } else {
        summed *= extent(d);
      }
    }
    DeviceRowContext<S, Desc::nloads, Desc::nconsts, 0, false> ctx;
    init_context(ctx, a);
    for (index_t t = threadIdx.y; t < summed; t += blockDim.y) {
      index_t u = t;
      for (int d = nd; d >= 0; --d)
        if (!kept(d)) {
          idx[d] = u % extent(d);
          u /= extent(d);
        }
      index_t row = 0;
      for (int d = 0; d < nd; ++d) row = row * a.row_dims[d] + idx[d];
      set_row(ctx, a, row);
      acc += Desc::tree::template eval<T>(ctx, idx[nd]);
    }
  }
  partial[threadIdx.y * blockDim.x + threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || o >= a.out_numel) return;
  for (unsigned y = 1; y < blockDim.y; ++y) acc += partial[y * blockDim.x + threadIdx.x];
  index_t off = 0;  // o itself, by the output's contiguous strides
  for (int d = 0; d <= nd; ++d)
    if (kept(d)) off += idx[d] * (d < nd ? a.out_outer[d] : a.out_inner);
  a.out[off] = narrow<S>(acc);
}

// The column sums of reduce_to_kernel's splits, added in split order.
template <class Desc, class Args>
__global__ void reduce_to_finish_kernel(const Args a, const compute_t<typename Desc::value_type>* splits, int n) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  using S = typename Desc::value_type;
  const index_t o = static_cast<index_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= a.len) return;
  compute_t<S> acc = splits[o];
  for (int s = 1; s < n; ++s) acc += splits[s * a.len + o];
  a.out[o * a.out_inner] = narrow<S>(acc);
}

template <class Desc>
struct ReduceToKernelCuda;
template <class T, class Tree, int NL, int NC>
struct ReduceToKernelCuda<lower::ReduceToKernel<T, Tree, NL, NC>> {
  using Desc = lower::ReduceToKernel<T, Tree, NL, NC>;
  using Args = lower::args_t<Desc>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void* scratch) {
    if (a.out_numel == 0) return;
    const index_t splits = reduce_to_splits(a);  // the scratch was sized by the same call (scratch_bytes)
    if (splits > 0) launch<true>(a, cfg, stream, static_cast<int>(splits), static_cast<compute_t<T>*>(scratch));
    else launch<false>(a, cfg, stream, 1, nullptr);
  }

 private:
  // Columns: Y up to 32 rows of a split at once, each thread summing at least 8 (kiln's choice),
  // as many as the kernel's registers allow (a block of 1024 threads holds 64 registers per
  // thread; a long fused expression takes more). General: 256 threads (or cfg's), Y of them
  // per output: 8 where an output sums 64 elements or more, fewer below, 1 for one.
  template <bool Columns>
  static void launch(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, int splits,
                     compute_t<T>* partial) {
    constexpr auto kernel = &reduce_to_kernel<Desc, Columns, Args>;
    const index_t share = (a.rows + splits - 1) / splits, summed = a.rows * a.len / a.out_numel;
    const int wanted = cfg.threads > 0 ? cfg.threads
                       : Columns ? kReduceToColumns * static_cast<int>(std::clamp<index_t>((share + 7) / 8, 1, 32))
                                 : 256;
    const int fit = max_threads_per_block<kernel>() / kReduceToColumns * kReduceToColumns;
    const int threads = std::max(kReduceToColumns, std::min(wanted, fit));
    const int per_output = Columns ? threads / kReduceToColumns
                                   : std::min(threads / kReduceToColumns,
                                              summed >= 64 ? 8 : summed >= 16 ? 4 : summed >= 4 ? 2 : 1);
    const dim3 block(static_cast<unsigned>(threads / per_output), static_cast<unsigned>(per_output));
    const dim3 blocks(static_cast<unsigned>((a.out_numel + block.x - 1) / block.x), static_cast<unsigned>(splits));
    const std::size_t smem = sizeof(compute_t<T>) * static_cast<std::size_t>(threads);
    launch_after_previous<kernel>(blocks, block, smem, stream, a, partial);
    if (splits > 1)
      launch_after_previous<&reduce_to_finish_kernel<Desc, Args>>(static_cast<unsigned>((a.len + 127) / 128), 128, 0,
                                                                  stream, a, static_cast<const compute_t<T>*>(partial),
                                                                  splits);
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
