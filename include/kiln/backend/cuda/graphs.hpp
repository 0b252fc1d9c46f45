// kiln: CUDA graphs for ReduceOverhead. A compiled call's kernels are captured once and
// replayed with one cudaGraphLaunch. A graph bakes in every address its kernels touch, so
// graphs are kept per key (GraphCache), a list of addresses that the caller chooses
// (runtime/cuda_executor.hpp: every bound tensor's and output's, or the params' only when the
// inputs and outputs go through buffers of the plan). A call whose key matches a kept graph
// replays it; otherwise the kernels are captured again, into the least recently used graph's
// executable when the cache is full (cudaGraphExecUpdate, cheaper than instantiating) or into
// a new one.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "kiln/backend/cuda/runtime.hpp"

namespace kiln::cuda {

// The graph of what launch_all() enqueues on `stream` (captured, not run). Relaxed mode lets
// launch_all() call cudaMalloc (PooledGraph's first allocations in its pool).
template <class Launch>
cudaGraph_t capture_graph(cudaStream_t stream, Launch& launch_all,
                          cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
  KILN_CUDA_CHECK(cudaStreamBeginCapture(stream, mode));
  cudaGraph_t graph = nullptr;
  try {
    launch_all();
  } catch (...) {
    (void)cudaStreamEndCapture(stream, &graph);
    if (graph) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  KILN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  return graph;
}

// One captured and instantiated graph, replayed by launch(): MaxAutotune times GEMM candidates
// so, as a call's graph runs them (compiled.hpp, tune_cuda).
class CapturedLaunches {
 public:
  template <class Launch>
  CapturedLaunches(cudaStream_t stream, Launch&& launch_all, cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
    cudaGraph_t graph = capture_graph(stream, launch_all, mode);
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    (void)cudaGraphDestroy(graph);
    KILN_CUDA_CHECK(e);
  }
  CapturedLaunches(const CapturedLaunches&) = delete;
  CapturedLaunches& operator=(const CapturedLaunches&) = delete;
  ~CapturedLaunches() { (void)cudaGraphExecDestroy(exec_); }
  void launch(cudaStream_t stream) const { KILN_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

// Page-locked host memory: what a graph's copy nodes read or write when the graph runs (a copy
// from pageable memory would be a synchronous copy, which a capture cannot hold).
class PinnedBytes {
 public:
  explicit PinnedBytes(std::size_t bytes) : bytes_(bytes) {
    KILN_CUDA_CHECK(cudaMallocHost(&p_, bytes > 0 ? bytes : 1));
  }
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
  ~PinnedBytes() { (void)cudaFreeHost(p_); }
  std::byte* get() const { return static_cast<std::byte*>(p_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_;
};

// A sequence of kiln calls (a training step: dozens of compiled programs) run as one CUDA
// graph. The first run() calls body() (which enqueues its work on kiln's stream), the second
// captures body() with the device memory it allocates coming from a private pool (Allocator,
// PoolScope), and later ones replay that graph with one cudaGraphLaunch: the blocks of the
// tensors body() made and freed stay reserved for the graph, and the tensors it keeps (where it
// stores its results) are rewritten by every replay. A graph bakes in every address, so `key`
// lists the addresses body() reads and writes outside its own allocations (parameters, static
// inputs), and plans_dropped is the sum of the programs' Compiled::plans_dropped() (their
// arenas are baked in too): a new key or count drops the graph and its pool, and the next two
// calls run and capture again. A body that cannot be captured (it synchronises, say) is run
// directly from then on.
class PooledGraph {
 public:
  PooledGraph() = default;
  PooledGraph(const PooledGraph&) = delete;
  PooledGraph& operator=(const PooledGraph&) = delete;
  ~PooledGraph() { reset(); }

  template <class Body>
  void run(const std::vector<const void*>& key, long plans_dropped, Body&& body) {
    if (key != key_ || plans_dropped != dropped_) {
      reset();
      key_ = key, dropped_ = plans_dropped;
    }
    cudaStream_t stream = cuda::stream();
    if (graph_) {
      ++replays_;
      graph_->launch(stream);
      return;
    }
    if (direct_) return body();
    if (calls_++ == 0) {
      const DirectLaunches direct;
      return body();
    }
    pool_ = Allocator::instance().new_pool();
    try {
      const PoolScope scope(pool_);
      graph_ = std::make_unique<CapturedLaunches>(stream, body, cudaStreamCaptureModeRelaxed);
    } catch (const CudaError&) {
      reset();
      direct_ = true;
      return body();
    }
    ++captures_;
    graph_->launch(stream);
  }
  // Drops the graph and its pool: the next two run() calls run and capture again.
  void reset() {
    graph_.reset();
    if (pool_) Allocator::instance().drop_pool(pool_);
    pool_ = 0, calls_ = 0;
  }
  long captures() const { return captures_; }
  long replays() const { return replays_; }

 private:
  std::unique_ptr<CapturedLaunches> graph_;
  std::vector<const void*> key_;
  std::uint64_t pool_ = 0;
  long calls_ = 0, captures_ = 0, replays_ = 0, dropped_ = 0;
  bool direct_ = false;
};

class GraphCache {
 public:
  explicit GraphCache(std::size_t capacity) : capacity_(capacity) {}
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() {
    for (auto& e : entries_) (void)cudaGraphExecDestroy(e.exec);
  }

  bool contains(const std::vector<const void*>& key) const {
    for (const auto& e : entries_)
      if (e.key == key) return true;
    return false;
  }

  // Replays the graph kept for `key`, or captures launch_all() on `stream` and replays that.
  template <class Launch>
  void run(const std::vector<const void*>& key, cudaStream_t stream, Launch&& launch_all) {
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].key == key) {
        std::rotate(entries_.begin(), entries_.begin() + i, entries_.begin() + i + 1);
        ++replays_;
        KILN_CUDA_CHECK(cudaGraphLaunch(entries_.front().exec, stream));
        return;
      }
    cudaGraph_t graph = capture_graph(stream, launch_all);
    cudaGraphExec_t exec = nullptr;
    if (entries_.size() == capacity_) {
      Entry& lru = entries_.back();
      cudaGraphExecUpdateResultInfo info;
      if (cudaGraphExecUpdate(lru.exec, graph, &info) == cudaSuccess) {
        exec = lru.exec;
      } else {
        (void)cudaGetLastError();
        (void)cudaGraphExecDestroy(lru.exec);
      }
      entries_.pop_back();
    }
    if (!exec) {
      const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
      if (e != cudaSuccess) (void)cudaGraphDestroy(graph);
      KILN_CUDA_CHECK(e);
    }
    (void)cudaGraphDestroy(graph);
    entries_.insert(entries_.begin(), Entry{key, exec});
    ++captures_;
    KILN_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  }

  long captures() const { return captures_; }  // graphs captured so far (first ones and re-captures)
  long replays() const { return replays_; }    // calls that replayed a kept graph
  std::size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::vector<const void*> key;
    cudaGraphExec_t exec;
  };
  std::size_t capacity_;
  std::vector<Entry> entries_;  // most recently used first
  long captures_ = 0, replays_ = 0;
};

}  // namespace kiln::cuda
