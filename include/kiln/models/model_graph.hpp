// kiln: a model's forward as one CUDA graph.
//
// kiln::models compiles a model by region (embedding, one layer run once per layer with that
// layer's weights, head): several compiled programs, called many times per forward. Under a
// policy with CUDA graphs (ReduceOverhead, MaxAutotune, the CudaGraphs backend) on a CUDA
// device, a model runs the forward of one shape so:
//   first call   the programs are called directly: each plans its shapes (MaxAutotune tunes);
//   second call  the same calls are captured into one CUDA graph (a compiled call made while
//                kiln's stream is capturing enqueues its kernels into that capture,
//                runtime/cuda_executor.hpp) and the graph runs;
//   later calls  one cudaGraphLaunch for the whole forward.
// A graph bakes in every address it touches, so what it reads and writes lives in buffers the
// model keeps per shape (GraphedShapes): the caller's inputs are copied into them before the
// launch and the outputs out of them after it, and values that change from call to call (token
// ids, positions) are staged in page-locked memory that the graph's first node copies to the
// device (StagedInputs). It also bakes in the arenas of the programs' plans: a program that
// drops a plan for lack of room (runtime/compiled.hpp, plans_dropped) makes every graph of the
// model run directly once more and be captured again.
#pragma once
#include <cstddef>
#include <algorithm>
#include <cstring>
#include <string>
#include <memory>
#include <utility>
#include <vector>

#include "kiln/core/config.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/runtime/policy.hpp"
#if KILN_WITH_CUDA
#include "kiln/backend/cuda/graphs.hpp"
#endif

namespace kiln::models {

// Whether a model compiled with Policies runs its forward as one CUDA graph on a CUDA device.
template <class... Policies>
inline constexpr bool model_graphs = KILN_WITH_CUDA && runtime::Policy<Policies...>::persistent;

#if KILN_WITH_CUDA

// One forward of one shape: run directly, then captured, then replayed (see the top).
class ForwardGraph {
 public:
  // body() enqueues the forward on kiln's stream. plans_dropped: the sum of the programs'
  // plans_dropped() now (the graph is dropped when it has changed since the graph was made).
  template <class Body, class Dropped>
  void run(Body&& body, Dropped&& plans_dropped) {
    if (plans_dropped() != dropped_) {
      graph_.reset();
      calls_ = 0;
    }
    cudaStream_t stream = cuda::stream();
    if (graph_) {
      ++replays_;
      graph_->launch(stream);
    } else if (calls_ == 0) {
      const cuda::DirectLaunches direct;  // the programs make no graphs of their own
      body();
    } else {
      graph_ = std::make_unique<cuda::CapturedLaunches>(stream, body);
      ++captures_;
      graph_->launch(stream);
    }
    ++calls_;
    dropped_ = plans_dropped();
  }
  long captures() const { return captures_; }
  long replays() const { return replays_; }

 private:
  std::unique_ptr<cuda::CapturedLaunches> graph_;
  long calls_ = 0, captures_ = 0, replays_ = 0, dropped_ = -1;
};

// Small inputs of a graphed forward that change from call to call: the host writes them into
// one page-locked block, and upload() (the graph's first node) copies the block to the device,
// where the programs read each through a view. Slots are added, then allocate() is called
// once; set() before each launch.
class StagedInputs {
 public:
  // A slot for a tensor of `shape` and element type U; returns its index.
  template <class U>
  std::size_t add(const Shape& shape) {
    const std::size_t bytes = shape.numel() * sizeof(U);
    slots_.push_back({total_, bytes});
    total_ += (bytes + kAlign - 1) / kAlign * kAlign;
    return slots_.size() - 1;
  }
  void allocate(Device device) {
    host_ = std::make_unique<cuda::PinnedBytes>(total_);
    device_ = std::make_unique<cuda::Buffer>(total_ > 0 ? total_ : 1, device.index);
    device_index_ = device.index;
  }
  // The device tensor of slot i: a view into the device block.
  template <class U>
  Tensor<U> view(std::size_t i, const Shape& shape) {
    return Tensor<U>::view(reinterpret_cast<U*>(static_cast<std::byte*>(device_->get()) + slots_[i].offset), shape,
                           Device::cuda(device_index_));
  }
  // Host values for slot i, uploaded by the next upload().
  template <class U>
  void set(std::size_t i, const Tensor<U>& host) {
    if (host.numel() * sizeof(U) != slots_[i].bytes)
      throw ShapeError("StagedInputs: slot " + std::to_string(i) + " holds " + std::to_string(slots_[i].bytes) +
                       " bytes, the values " + host.shape().str());
    std::memcpy(host_->get() + slots_[i].offset, host.data(), slots_[i].bytes);
  }
  void upload() const {
    KILN_CUDA_CHECK(cudaMemcpyAsync(device_->get(), host_->get(), total_, cudaMemcpyHostToDevice, cuda::stream()));
  }

 private:
  static constexpr std::size_t kAlign = 256;
  struct Slot {
    std::size_t offset, bytes;
  };
  std::vector<Slot> slots_;
  std::size_t total_ = 0;
  std::unique_ptr<cuda::PinnedBytes> host_;
  std::unique_ptr<cuda::Buffer> device_;
  int device_index_ = 0;
};

// Per-shape state of a graphed model, the most recently used first; at most kMax shapes (the
// least recently used is dropped, with its buffers and graph).
template <class Key, class State>
class GraphedShapes {
 public:
  static constexpr std::size_t kMax = 4;
  // The state for key, made by make() when there is none.
  template <class Make>
  State& find(const Key& key, Make&& make) {
    for (std::size_t i = 0; i < entries_.size(); ++i)
      if (entries_[i].first == key) {
        std::rotate(entries_.begin(), entries_.begin() + i, entries_.begin() + i + 1);
        return *entries_.front().second;
      }
    if (entries_.size() == kMax) entries_.pop_back();
    entries_.insert(entries_.begin(), {key, make()});
    return *entries_.front().second;
  }
  // Over the kept shapes: the graphs captured and the forwards that replayed one (State's
  // captures() and replays()).
  long captures() const { return sum([](const State& s) { return s.captures(); }); }
  long replays() const { return sum([](const State& s) { return s.replays(); }); }

 private:
  template <class F>
  long sum(F f) const {
    long n = 0;
    for (const auto& e : entries_) n += f(*e.second);
    return n;
  }
  std::vector<std::pair<Key, std::unique_ptr<State>>> entries_;
};

#else

// CPU-only builds have no CUDA graphs: model_graphs<...> is false and these are never used.
template <class Key, class State>
class GraphedShapes {
 public:
  long captures() const { return 0; }
  long replays() const { return 0; }
};

#endif

// f.into(out, bindings...) spelt as a call f(bindings...), for the architectures' helpers that
// call a program (Arch::embed(f, ...), Arch::layer(f, ...)): runs f into out and returns a view
// of it.
template <class F, class U>
struct Into {
  F& f;
  Tensor<U>& out;
  template <class... Bs>
  Tensor<U> operator()(const Bs&... bs) {
    f.into(out, bs...);
    return Tensor<U>::view(out.data(), out.shape(), out.device());
  }
};
template <class F, class U>
Into<F, U> into(F& f, Tensor<U>& out) {
  return {f, out};
}

}  // namespace kiln::models
