// kiln: CUDA graphs for ReduceOverhead. A compiled call's kernels are captured once and
// replayed with one cudaGraphLaunch. A graph bakes in every address its kernels touch, so
// graphs are kept per key: the addresses of the bound tensors and outputs (the arena is the
// plan's own and fixed). A call whose addresses match a kept graph replays it; otherwise the
// kernels are captured again, into the least recently used graph's executable when the cache
// is full (cudaGraphExecUpdate, cheaper than instantiating) or into a new one. No tensor is
// ever copied into a static buffer, and an output is written where the caller's tensor lives.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kiln/backend/cuda/runtime.hpp"

namespace kiln::cuda {

// The graph of what launch_all() enqueues on `stream` (captured, not run).
template <class Launch>
cudaGraph_t capture_graph(cudaStream_t stream, Launch& launch_all) {
  KILN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
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
  CapturedLaunches(cudaStream_t stream, Launch&& launch_all) {
    cudaGraph_t graph = capture_graph(stream, launch_all);
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

class GraphCache {
 public:
  static constexpr std::size_t kMaxGraphs = 4;

  GraphCache() = default;
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;
  ~GraphCache() {
    for (auto& e : entries_) (void)cudaGraphExecDestroy(e.exec);
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
    if (entries_.size() == kMaxGraphs) {
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
  std::vector<Entry> entries_;  // most recently used first
  long captures_ = 0, replays_ = 0;
};

}  // namespace kiln::cuda
