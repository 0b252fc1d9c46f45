// kiln: the index-rows kind on CUDA (embedding and scatter_add_rows; lower/args.hpp's
// IndexRowsArgs).
// - Gather: a block per output row at a time (grid-stride over rows), its threads along the
//   row, so a row of the table is read and written coalesced. An id outside the table gives a
//   row of NaN (the ids live on the device and are not checked on the host).
// - Scatter: block b owns output rows [V b / B, V (b + 1) / B) and zeroes them (one short row:
//   scatter_one_row, below, sums it in registers instead). It then walks
//   the ids in tiles of one per thread, compacts the positions whose id it owns (in order, by
//   warp ballots) into shared memory, and adds those src rows into its rows, each thread along
//   the row. Every output element is summed by one thread in increasing position, with no
//   atomics: the result is deterministic. Each block reads every id (B x the ids' bytes, from
//   L2). The block's rows are zeroed first with 16-byte stores. A 16-bit output is summed in
//   float in the kernel's scratch and rounded once; only the rows that some id names (marked
//   in a shared bitmap by a first pass over the ids) go through the scratch, the others are
//   just zero. With GPT-2's table and 8 x 1024 ids, 85% of the rows have no id.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kiln/backend/cuda/launch.hpp"
#include "kiln/backend/cuda/launch_config.cuh"
#include "kiln/lower/args.hpp"

namespace kiln::cuda {

template <class T, class Args>
__global__ void gather_rows_kernel(const Args a) {
  await_previous_kernel();  // launched after the previous kernel (launch_after_previous)
  for (index_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const auto v = static_cast<index_t>(a.ids[r]);
    T* out = a.out + r * a.len;
    if (v < 0 || v >= a.table_rows) {
      for (index_t j = threadIdx.x; j < a.len; j += blockDim.x) out[j] = narrow<T>(static_cast<compute_t<T>>(NAN));
      continue;
    }
    const T* src = a.ptr[0] + v * a.table_row_stride;
    for (index_t j = threadIdx.x; j < a.len; j += blockDim.x) out[j] = src[j * a.inner[0]];
  }
}

inline constexpr int kScatterThreads = 256;
// The most rows one scatter block owns: its 16-bit path marks the rows it touches in a shared
// bitmap of this many bits.
inline constexpr index_t kScatterMaxOwnedRows = 4096;

// Zeroes p[0, n) with the block's threads: 16-byte stores from the first 16-byte boundary on.
template <class T>
__device__ void zero_span(T* p, index_t n) {
  const auto misalign = reinterpret_cast<std::uintptr_t>(p) % 16;
  const index_t head = std::min<index_t>(n, misalign ? static_cast<index_t>((16 - misalign) / sizeof(T)) : 0);
  const index_t vectors = static_cast<index_t>((n - head) * sizeof(T) / 16);
  const index_t tail = head + vectors * static_cast<index_t>(16 / sizeof(T));
  for (index_t j = threadIdx.x; j < head; j += blockDim.x) p[j] = T{};
  auto* body = reinterpret_cast<uint4*>(p + head);
  for (index_t j = threadIdx.x; j < vectors; j += blockDim.x) body[j] = make_uint4(0, 0, 0, 0);
  for (index_t j = tail + threadIdx.x; j < n; j += blockDim.x) p[j] = T{};
}

// The scatter of a block that owns one row of at most kScatterRowCols elements (a table of at
// most a few rows per SM: a character vocabulary, positions). The row's hits are taken a stage
// at a time: the block loads the stage's src rows into shared memory, all loads in flight at
// once, and each thread then adds them in position order to its columns' sums, held in
// registers; the row is stored once at the end (rounded once for a 16-bit table). Each element
// is still summed by one thread in increasing position, as the CPU sums it. The general path,
// a read-modify-write of the output per hit with each hit's loads waiting for the last one's
// store, took 0.11 ms for the char-GPT's tied embedding (2048 ids into 114 rows: a frequent
// character's block adds some 300 rows).
inline constexpr index_t kScatterRowCols = 1024;
inline constexpr index_t kScatterStage = 4096;  // elements of src rows staged at once (16 KiB of f32)

// The positions base + t (t < the block's threads) whose id the block owns, in order, into
// hits; returns how many. Every thread of the block calls it.
template <class Args, class Owns>
__device__ int compact_hits(const Args& a, const Owns& owns, index_t base, index_t* hits, int* warp_hits) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const index_t p = base + threadIdx.x;
  const bool hit = p < a.rows && owns(p);
  const unsigned ballot = __ballot_sync(0xffffffffu, hit);
  if (lane == 0) warp_hits[warp] = __popc(ballot);
  __syncthreads();
  int before = 0, total = 0;
  for (int w = 0; w < nwarps; ++w) {
    before += w < warp ? warp_hits[w] : 0;
    total += warp_hits[w];
  }
  if (hit) hits[before + __popc(ballot & ((1u << lane) - 1u))] = p;
  __syncthreads();
  return total;
}
template <class T, class Args, class Owns>
__device__ void scatter_one_row(const Args& a, index_t v, const Owns& owns, index_t* hits, int* warp_hits) {
  using C = compute_t<T>;
  constexpr int kPerThread = static_cast<int>(kScatterRowCols / kScatterThreads);
  constexpr int kLoadsPerThread = static_cast<int>(kScatterStage / kScatterThreads);
  __shared__ C staged[kScatterStage];
  const index_t len = a.len, per_stage = kScatterStage / len;  // len <= kScatterRowCols < kScatterStage
  C acc[kPerThread];
#pragma unroll
  for (int c = 0; c < kPerThread; ++c) acc[c] = C(0);
  for (index_t base = 0; base < a.rows; base += kScatterThreads) {
    const int total = compact_hits(a, owns, base, hits, warp_hits);
    for (index_t m0 = 0; m0 < total; m0 += per_stage) {
      const index_t n = std::min<index_t>(per_stage, total - m0);
      // Every load of the stage issued before the first store, so that they are in flight
      // together (a loop storing each as it arrives waits for one load at a time).
      C v[kLoadsPerThread];
#pragma unroll
      for (int u = 0; u < kLoadsPerThread; ++u) {
        const index_t e = threadIdx.x + static_cast<index_t>(u) * kScatterThreads;
        if (e >= n * len) continue;
        const index_t r = e / len, j = e - r * len;
        const T* src[1];
        lower::row_pointers(a, hits[m0 + r], src);
        v[u] = widen(src[0][j * a.inner[0]]);
      }
#pragma unroll
      for (int u = 0; u < kLoadsPerThread; ++u) {
        const index_t e = threadIdx.x + static_cast<index_t>(u) * kScatterThreads;
        if (e < n * len) staged[e] = v[u];
      }
      __syncthreads();
      for (index_t r = 0; r < n; ++r)
#pragma unroll
        for (int c = 0; c < kPerThread; ++c) {
          const index_t j = threadIdx.x + static_cast<index_t>(c) * kScatterThreads;
          if (j < len) acc[c] += staged[r * len + j];
        }
      __syncthreads();  // before the next stage overwrites `staged`
    }
  }
#pragma unroll
  for (int c = 0; c < kPerThread; ++c) {
    const index_t j = threadIdx.x + static_cast<index_t>(c) * kScatterThreads;
    if (j < len) a.out[v * len + j] = narrow<T>(acc[c]);
  }
}

template <class T, class Args>
__global__ void __launch_bounds__(kScatterThreads) scatter_add_rows_kernel(const Args a, compute_t<T>* wide) {
  using C = compute_t<T>;
  constexpr bool kWide = !std::is_same_v<T, C>;
  __shared__ index_t hits[kScatterThreads];  // positions of this tile whose id this block owns, in order
  __shared__ int warp_hits[kScatterThreads / 32];
  __shared__ unsigned touched[kWide ? kScatterMaxOwnedRows / 32 : 1];  // rows [v0, v1) with a hit
  await_previous_kernel();
  const index_t rows = a.table_rows, len = a.len;
  const index_t v0 = rows * blockIdx.x / gridDim.x, v1 = rows * (blockIdx.x + 1) / gridDim.x;
  const auto owns = [&](index_t p) {
    const auto v = static_cast<index_t>(a.ids[p]);
    return v >= v0 && v < v1;
  };
  if (v1 - v0 == 1 && len <= kScatterRowCols) {
    scatter_one_row<T>(a, v0, owns, hits, warp_hits);
    return;
  }
  // Rows without a hit are zero. A 16-bit output sums the rows with hits in float in the
  // scratch and rounds them into the output at the end; only those rows go through the scratch.
  zero_span(a.out + v0 * len, (v1 - v0) * len);
  C* acc;
  if constexpr (kWide) {
    acc = wide;
    for (index_t w = threadIdx.x; w < kScatterMaxOwnedRows / 32; w += blockDim.x) touched[w] = 0;
    __syncthreads();
    for (index_t p = threadIdx.x; p < a.rows; p += blockDim.x)
      if (owns(p)) {
        const auto r = static_cast<index_t>(a.ids[p]) - v0;
        atomicOr(&touched[r / 32], 1u << (r % 32));
      }
    __syncthreads();
    for (index_t v = v0; v < v1; ++v)
      if (touched[(v - v0) / 32] >> ((v - v0) % 32) & 1u) zero_span(acc + v * len, len);
  } else {
    acc = a.out;
  }
  __syncthreads();  // the zeroed rows before the sums (each element's owner thread may differ)
  for (index_t base = 0; base < a.rows; base += blockDim.x) {
    const int total = compact_hits(a, owns, base, hits, warp_hits);
    for (int m = 0; m < total; ++m) {
      const index_t q = hits[m];
      const T* src[1];
      lower::row_pointers(a, q, src);
      C* o = acc + static_cast<index_t>(a.ids[q]) * len;
      for (index_t j = threadIdx.x; j < len; j += blockDim.x) o[j] += widen(src[0][j * a.inner[0]]);
    }
    __syncthreads();  // before the next tile overwrites hits and warp_hits
  }
  if constexpr (kWide)
    for (index_t v = v0; v < v1; ++v)
      if (touched[(v - v0) / 32] >> ((v - v0) % 32) & 1u)
        for (index_t j = threadIdx.x; j < len; j += blockDim.x) a.out[v * len + j] = narrow<T>(acc[v * len + j]);
}

template <class Desc>
struct IndexRowsCuda;
template <class T, class I, bool Scatter>
struct IndexRowsCuda<lower::IndexRowsKernel<T, I, Scatter>> {
  using Args = lower::IndexRowsArgs<T, I>;
  static void run(const Args& a, const lower::LaunchConfig& cfg, cudaStream_t stream, void* scratch) {
    if constexpr (Scatter) {
      if (a.table_rows == 0 || a.len == 0) return;
      // A few blocks per multiprocessor, no block without rows, none with more than
      // kScatterMaxOwnedRows.
      const auto blocks = static_cast<unsigned>(
          std::max(std::min<index_t>(a.table_rows, index_t{4} * multiprocessors()),
                   (a.table_rows + kScatterMaxOwnedRows - 1) / kScatterMaxOwnedRows));
      launch_after_previous<&scatter_add_rows_kernel<T, Args>>(blocks, dim3(kScatterThreads), 0, stream, a,
                                                               static_cast<compute_t<T>*>(scratch));
    } else {
      if (a.rows == 0 || a.len == 0) return;
      const int threads = cfg.threads > 0 ? cfg.threads : static_cast<int>(std::clamp<index_t>((a.len + 31) / 32 * 32, 32, 256));
      const auto blocks = static_cast<unsigned>(std::min<index_t>(a.rows, index_t{16} * multiprocessors()));
      launch_after_previous<&gather_rows_kernel<T, Args>>(blocks, dim3(threads), 0, stream, a);
    }
    KILN_CUDA_CHECK(cudaGetLastError());
  }
};

}  // namespace kiln::cuda
