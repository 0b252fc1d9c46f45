// kiln: the CUDA runtime side, usable from g++ and nvcc alike (the CUDA runtime's C API):
// checked calls, the stream kiln works on, the caching allocator and the Tensor memory hooks.
//
// Streams: every kiln launch, copy and allocation goes on kiln::cuda::stream(), a blocking
// stream kiln creates per device and thread (so it orders with the legacy default stream), or
// the caller's stream after kiln::cuda::set_stream(s) / a StreamGuard.
//
// Caching allocator (like PyTorch's): freed blocks go to free lists keyed by (stream, size
// rounded up to 512 bytes below 1 MiB, to 2 MiB from there) and are handed out again on the
// same stream, where the stream's order makes reuse safe without synchronising. A call in
// steady state therefore never calls cudaMalloc (memory_stats().cuda_mallocs counts them).
// When cudaMalloc fails, the cache is given back and the allocation retried once; then
// kiln::OutOfMemory is thrown with the requested and free bytes.
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/core/device.hpp"

#define KILN_CUDA_CHECK(call) ::kiln::cuda::check((call), #call, __FILE__, __LINE__)

namespace kiln::cuda {

inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so the process can go on
  throw CudaError(std::string(call) + " failed: " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ") at " +
                  file + ":" + std::to_string(line), static_cast<int>(e));
}

// Number of CUDA devices, 0 when there is no driver or device (never throws).
inline int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

inline int current_device() {
  int d = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

// An attribute of the current device, asked once per device and thread.
inline int device_attribute(cudaDeviceAttr attribute) {
  thread_local std::map<std::pair<int, int>, int> known;
  const int d = current_device();
  const auto key = std::pair<int, int>(d, static_cast<int>(attribute));
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int value = 0;
  KILN_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, d));
  return known.emplace(key, value).first->second;
}
// The current device's compute capability as 10 major + minor (90: Hopper).
inline int compute_capability() {
  return 10 * device_attribute(cudaDevAttrComputeCapabilityMajor) + device_attribute(cudaDevAttrComputeCapabilityMinor);
}
// The current device's streaming multiprocessors (a persistent kernel's grid).
inline int multiprocessors() { return device_attribute(cudaDevAttrMultiProcessorCount); }
// Thread-block clusters (9.0 on: Hopper), which the small-product kernel needs.
inline bool device_has_clusters() { return compute_capability() >= 90; }
// mma.sync for 16-bit operands (8.0 on), which kiln's mma.sync GEMM kernel needs.
inline bool device_has_tensor_mma() { return compute_capability() >= 80; }
// 9.0 exactly, where code built for sm_90a (kiln's wgmma GEMM kernel) runs.
inline bool device_is_sm90() { return compute_capability() == 90; }

// The current device as MaxAutotune's cache keys name it: model, compute capability, driver.
inline std::string device_id() {
  const int d = current_device();
  cudaDeviceProp p;
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, d));
  int driver = 0;
  KILN_CUDA_CHECK(cudaDriverGetVersion(&driver));
  return std::string(p.name) + "; sm_" + std::to_string(p.major) + std::to_string(p.minor) + "; driver " +
         std::to_string(driver);
}

namespace detail {
struct StreamSlot {
  cudaStream_t user = nullptr;
  bool user_set = false;
  std::unordered_map<int, cudaStream_t> own;  // per device; never destroyed (outlives tensors)
};
inline StreamSlot& stream_slot() {
  thread_local StreamSlot slot;
  return slot;
}
}  // namespace detail

// The stream kiln works on in this thread, on the current device.
inline cudaStream_t stream() {
  auto& s = detail::stream_slot();
  if (s.user_set) return s.user;
  const int d = current_device();
  auto it = s.own.find(d);
  if (it != s.own.end()) return it->second;
  cudaStream_t st;
  KILN_CUDA_CHECK(cudaStreamCreate(&st));
  s.own.emplace(d, st);
  return st;
}
// Makes kiln work on `s` in this thread (until reset_stream()).
inline void set_stream(cudaStream_t s) {
  detail::stream_slot().user = s;
  detail::stream_slot().user_set = true;
}
inline void reset_stream() { detail::stream_slot().user_set = false; }

// Sets the stream for a scope, then restores the previous choice.
class StreamGuard {
 public:
  explicit StreamGuard(cudaStream_t s) : prev_(detail::stream_slot().user), prev_set_(detail::stream_slot().user_set) {
    set_stream(s);
  }
  ~StreamGuard() {
    detail::stream_slot().user = prev_;
    detail::stream_slot().user_set = prev_set_;
  }
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  cudaStream_t prev_;
  bool prev_set_;
};

inline void synchronize() { KILN_CUDA_CHECK(cudaStreamSynchronize(stream())); }

// Whether work enqueued on `s` is being captured into a CUDA graph (models/model_graph.hpp
// captures a whole model's forward): a compiled call then enqueues its kernels into that
// capture rather than replaying a graph of its own.
inline bool capturing(cudaStream_t s) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  KILN_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  return status == cudaStreamCaptureStatusActive;
}

// While a DirectLaunches scope is alive on a thread, compiled calls there launch their kernels
// directly rather than through CUDA graphs of their own: the first run of a sequence of calls
// that the next run captures as one graph (PooledGraph) makes no graphs it would never use.
inline bool& direct_launches() {
  thread_local bool on = false;
  return on;
}
class DirectLaunches {
 public:
  DirectLaunches() : previous_(direct_launches()) { direct_launches() = true; }
  DirectLaunches(const DirectLaunches&) = delete;
  DirectLaunches& operator=(const DirectLaunches&) = delete;
  ~DirectLaunches() { direct_launches() = previous_; }

 private:
  bool previous_;
};

// A CUDA event, destroyed with its scope (so a throwing launch leaks none).
class Event {
 public:
  Event() { KILN_CUDA_CHECK(cudaEventCreate(&e_)); }
  ~Event() { (void)cudaEventDestroy(e_); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  operator cudaEvent_t() const { return e_; }
  // Milliseconds from `start` to this event, after waiting for it.
  float since(const Event& start) const {
    KILN_CUDA_CHECK(cudaEventSynchronize(e_));
    float ms = 0;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

struct MemoryStats {
  std::size_t allocated_bytes = 0;  // in live blocks (rounded sizes)
  std::size_t cached_bytes = 0;     // in free lists
  std::size_t peak_bytes = 0;       // most allocated at once since the last reset_peak()
  std::size_t cuda_mallocs = 0;     // cudaMalloc calls so far
};

class Allocator {
 public:
  static Allocator& instance() {
    static Allocator* a = new Allocator;  // never destroyed: tensors may be freed at exit
    return *a;
  }
  static std::size_t rounded(std::size_t bytes) {
    constexpr std::size_t kSmall = 512, kLarge = std::size_t{2} << 20;
    bytes = std::max<std::size_t>(bytes, 1);
    return bytes < (std::size_t{1} << 20) ? (bytes + kSmall - 1) / kSmall * kSmall : (bytes + kLarge - 1) / kLarge * kLarge;
  }

  void* allocate(std::size_t bytes, int device) {
    int prev = current_device();
    if (prev != device) KILN_CUDA_CHECK(cudaSetDevice(device));
    struct Restore {
      int d, prev;
      ~Restore() {
        if (d != prev) (void)cudaSetDevice(prev);
      }
    } restore{device, prev};
    const std::size_t size = rounded(bytes);
    cudaStream_t s = stream();
    const std::uint64_t pool = active_pool();
    std::lock_guard<std::mutex> lock(mutex_);
    auto& list = free_[Key{device, s, size, pool}];
    void* p = nullptr;
    if (!list.empty()) {
      p = list.back();
      list.pop_back();
      stats_.cached_bytes -= size;
    } else {
      cudaError_t e = cudaMalloc(&p, size);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        release_cached(device);
        e = cudaMalloc(&p, size);
      }
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        std::size_t free_b = 0, total = 0;
        (void)cudaMemGetInfo(&free_b, &total);
        throw OutOfMemory("kiln: cuda:" + std::to_string(device) + " is out of memory: asked for " +
                              std::to_string(bytes) + " bytes, " + std::to_string(free_b) + " free of " +
                              std::to_string(total),
                          bytes, free_b);
      }
      check(e, "cudaMalloc", __FILE__, __LINE__);
      ++stats_.cuda_mallocs;
    }
    blocks_[p] = Key{device, s, size, pool};
    stats_.allocated_bytes += size;
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.allocated_bytes);
    return p;
  }

  void release(void* p) noexcept {
    if (!p) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = blocks_.find(p);
    if (it == blocks_.end()) return;
    const Key k = it->second;
    blocks_.erase(it);
    stats_.allocated_bytes -= k.size;
    try {
      free_[k].push_back(p);
      stats_.cached_bytes += k.size;
    } catch (...) {
      (void)cudaFree(p);
    }
  }

  // Private pools. While a PoolScope is alive on a thread, kiln's allocations on that thread
  // come from its pool: a block freed (on any thread) goes back to its pool's free list, and
  // only an allocation in that pool takes it again. A CUDA graph captured while its pool is
  // active (PooledGraph) thus keeps every block its kernels touch to itself, for its replays.
  // drop_pool frees the pool's free blocks; its blocks still in use go back to the shared
  // cache when they are freed.
  std::uint64_t new_pool() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ++pools_;
  }
  void drop_pool(std::uint64_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    (void)cudaStreamSynchronize(stream());
    for (auto it = free_.begin(); it != free_.end();) {
      if (it->first.pool == pool) {
        for (void* p : it->second) (void)cudaFree(p);
        stats_.cached_bytes -= it->first.size * it->second.size();
        it = free_.erase(it);
      } else {
        ++it;
      }
    }
    for (auto& [p, k] : blocks_)
      if (k.pool == pool) k.pool = 0;
  }
  static std::uint64_t& active_pool() {
    thread_local std::uint64_t pool = 0;
    return pool;
  }

  // Gives every cached block of `device` back to the driver.
  void empty_cache(int device) {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached(device);
  }

  MemoryStats stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_bytes = stats_.allocated_bytes;
  }

 private:
  struct Key {
    int device;
    cudaStream_t stream;
    std::size_t size;
    std::uint64_t pool;  // 0: the shared cache
    bool operator<(const Key& o) const {
      if (device != o.device) return device < o.device;
      if (stream != o.stream) return std::less<cudaStream_t>()(stream, o.stream);
      if (size != o.size) return size < o.size;
      return pool < o.pool;
    }
  };
  void release_cached(int device) {  // mutex held; private pools keep their blocks
    (void)cudaDeviceSynchronize();
    for (auto& [k, list] : free_) {
      if (k.device != device || k.pool != 0) continue;
      for (void* p : list) (void)cudaFree(p);
      stats_.cached_bytes -= k.size * list.size();
      list.clear();
    }
  }
  std::mutex mutex_;
  std::map<Key, std::vector<void*>> free_;
  std::unordered_map<void*, Key> blocks_;
  MemoryStats stats_;
  std::uint64_t pools_ = 0;
};

// Makes `pool` the calling thread's pool (Allocator::new_pool) for the scope's lifetime.
class PoolScope {
 public:
  explicit PoolScope(std::uint64_t pool) : previous_(Allocator::active_pool()) { Allocator::active_pool() = pool; }
  PoolScope(const PoolScope&) = delete;
  PoolScope& operator=(const PoolScope&) = delete;
  ~PoolScope() { Allocator::active_pool() = previous_; }

 private:
  std::uint64_t previous_;
};

inline MemoryStats memory_stats() { return Allocator::instance().stats(); }
inline void reset_peak_memory() { Allocator::instance().reset_peak(); }
inline void empty_cache(int device = 0) { Allocator::instance().empty_cache(device); }

// Device memory owned by kiln for its own use (arenas, workspaces, static graph buffers).
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::size_t bytes, int device) : bytes_(bytes) {
    if (bytes > 0) p_ = Allocator::instance().allocate(bytes, device);
  }
  Buffer(Buffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  Buffer& operator=(Buffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Buffer() { Allocator::instance().release(p_); }
  void* get() const { return p_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* p_ = nullptr;
  std::size_t bytes_ = 0;
};

namespace detail {
inline void* hook_allocate(std::size_t bytes, int device) { return Allocator::instance().allocate(bytes, device); }
inline void hook_release(void* p, std::size_t, int) noexcept { Allocator::instance().release(p); }
inline void hook_copy(void* dst, const void* src, std::size_t bytes, int kind) {
  const cudaMemcpyKind k = kind == 0 ? cudaMemcpyHostToDevice : kind == 1 ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
  cudaStream_t s = stream();
  KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, k, s));
  if (kind != 2) KILN_CUDA_CHECK(cudaStreamSynchronize(s));  // host memory is the caller's again on return
}
inline bool install_hooks() {
  auto& h = ::kiln::detail::device_hooks();
  h.allocate = &hook_allocate;
  h.release = &hook_release;
  h.copy = &hook_copy;
  return true;
}
// Installed before main by any program that includes this header.
inline const bool hooks_installed = install_hooks();
}  // namespace detail

}  // namespace kiln::cuda
