// kiln: Tensor<T>, an owning, contiguous, row-major array with value semantics
// (a copy is a deep copy, on the same device; a move is cheap), like Eigen's dense matrices.
// It lives on the CPU or on a CUDA device (t.to(kiln::Device::cuda()), t.device()); CUDA
// memory comes from kiln's caching allocator (backend/cuda/runtime.hpp).
#pragma once
#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/shape.hpp"

namespace kiln {

namespace detail {
// 64-byte alignment: a cache line, and the widest SIMD register (AVX-512).
inline constexpr std::size_t kAlignment = 64;

// Buffers of 1 MiB and more are cached when freed, in free lists keyed by size rounded up to
// 1 MiB, and handed out again: a fresh output of a repeated call then reuses pages that are
// already mapped instead of faulting in (and zeroing) new ones, which costs more than the
// kernel writing it. At most kHostCacheBytes are kept; the rest goes back to the system.
inline constexpr std::size_t kCachedFrom = std::size_t{1} << 20;
inline constexpr std::size_t kHostCacheBytes = std::size_t{1} << 30;

class HostCache {
 public:
  // Never destroyed, like the device allocator: a tensor with static storage (a global, or a
  // function's static cache of inputs) may be freed at exit after any other static object,
  // and must find the cache alive. (A destroyed cache was a use-after-free at exit, found by
  // AddressSanitizer in bench_gpu, whose drawn inputs live in a function-static map.) The
  // process's end returns the cached buffers.
  static HostCache& instance() {
    static HostCache* cache = new HostCache;
    return *cache;
  }
  ~HostCache() = delete;  // never destroyed, as above: a static HostCache object cannot compile
  // bytes rounded up to a whole number of kCachedFrom; std::bad_alloc when that wraps around
  // (no buffer of such a size can exist, so release() never sees one).
  static std::size_t rounded(std::size_t bytes) {
    std::size_t sum = 0;
    if (__builtin_add_overflow(bytes, kCachedFrom - 1, &sum)) throw std::bad_alloc();
    return sum / kCachedFrom * kCachedFrom;
  }
  void* allocate(std::size_t bytes) {
    const std::size_t size = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        cached_ -= size;
        return p;
      }
    }
    return ::operator new(size, std::align_val_t(kAlignment));
  }
  void release(void* p, std::size_t bytes) noexcept {
    const std::size_t size = rounded(bytes);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (cached_ + size <= kHostCacheBytes) {
        try {
          free_[size].push_back(p);
          cached_ += size;
          return;
        } catch (...) {  // no memory for the list: free the buffer instead
        }
      }
    }
    ::operator delete(p, std::align_val_t(kAlignment));
  }
 private:
  std::mutex mutex_;
  std::map<std::size_t, std::vector<void*>> free_;
  std::size_t cached_ = 0;
};

inline void* aligned_alloc_bytes(std::size_t bytes) {
  if (bytes >= kCachedFrom) return HostCache::instance().allocate(bytes);
  return ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t(kAlignment));
}
struct AlignedDelete {
  std::size_t bytes = 0;
  Device device = Device::cpu();
  bool owns = true;  // false: a view over memory someone else owns (Tensor::view), never freed here
  void operator()(void* p) const noexcept {
    if (!owns) return;
    if (device.is_cuda()) device_hooks().release(p, bytes, device.index);
    else if (bytes >= kCachedFrom) HostCache::instance().release(p, bytes);
    else ::operator delete(p, std::align_val_t(kAlignment));
  }
};
template <class T>
T* aligned_new(std::size_t n) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(n, sizeof(T), &bytes)) throw std::bad_array_new_length();
  return static_cast<T*>(aligned_alloc_bytes(bytes));
}

// The storage a tensor of `shape` needs, in bytes: numel * element_size, after checking that
// the shape keeps kiln's bound on sizes (shape.hpp), which also keeps this product below 2^62.
// ShapeError "Tensor: shape [..] has ..." otherwise, before anything is allocated.
inline std::size_t tensor_bytes(const Shape& shape, std::size_t element_size) {
  shape.require_addressable("Tensor: shape");
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(shape.numel(), element_size, &bytes))
    throw ShapeError("Tensor: shape " + shape.str() + " has more bytes than an index can address");
  return bytes;
}
}  // namespace detail

template <class T>
class Tensor {
  static_assert(is_element_type_v<T>,
                "kiln::Tensor: the element type must be float, double, kiln::bf16, kiln::f16, or an index type "
                "(kiln::i32, kiln::i64)");

 public:
  using value_type = T;

  Tensor() = default;
  // The shape is checked (ShapeError for a negative extent, or a size past kMaxElements)
  // before anything is allocated.
  explicit Tensor(const Shape& shape, Device device = Device::cpu())
      : Tensor(shape, detail::tensor_bytes(shape, sizeof(T)), device) {}
  Tensor(std::initializer_list<std::size_t> dims) : Tensor(Shape(dims)) {}
  explicit Tensor(const std::vector<std::size_t>& dims) : Tensor(Shape(dims)) {}

  Tensor(const Tensor& o) : Tensor(o.shape_, o.device()) {
    if (device().is_cuda()) copy_bytes(data(), o.data(), numel() * sizeof(T), 2);
    else std::copy_n(o.data(), numel(), data());
  }
  Tensor& operator=(const Tensor& o) {
    if (this != &o) *this = Tensor(o);
    return *this;
  }
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  const Shape& shape() const { return shape_; }
  Device device() const { return data_.get_deleter().device; }
  bool is_cuda() const { return device().is_cuda(); }

  // A copy on `to` (the tensor itself, copied, when it is there already).
  Tensor to(Device to) const {
    if (to == device()) return *this;
    Tensor t(shape_, to);
    const int kind = device().is_cpu() ? 0 : to.is_cpu() ? 1 : 2;
    copy_bytes(t.data(), data(), numel() * sizeof(T), kind);
    return t;
  }
  Tensor cpu() const { return to(Device::cpu()); }
  Tensor cuda(int index = 0) const { return to(Device::cuda(index)); }

  // A copy with element type U on the same device, each value converted (to a 16-bit type:
  // rounded to nearest even), e.g. xt.as<kiln::bf16>(). A CUDA tensor's values go through the
  // host.
  template <class U>
  Tensor<U> as() const {
    if (device().is_cuda()) return cpu().template as<U>().to(device());
    Tensor<U> t(shape_);
    for (std::size_t i = 0; i < numel(); ++i) t[i] = static_cast<U>(static_cast<compute_t<U>>(widen((*this)[i])));
    return t;
  }
  int rank() const { return shape_.rank(); }
  std::size_t numel() const { return data_ ? numel_ : 0; }
  T* data() { return data_.get(); }
  const T* data() const { return data_.get(); }

  // Element i in row-major order, unchecked; a CUDA tensor throws DeviceError (its memory is
  // not the host's: copy it with .cpu() first).
  T& operator[](std::size_t i) {
    if (is_cuda()) [[unlikely]] throw_on_device("operator[]");
    return data_[i];
  }
  const T& operator[](std::size_t i) const {
    if (is_cuda()) [[unlikely]] throw_on_device("operator[]");
    return data_[i];
  }

  // Element at a multi-index, e.g. t.at({i, j}); bounds are checked (CPU tensors only: the
  // element operator[] of a CUDA tensor is a device address).
  T& at(std::initializer_list<std::size_t> idx) { return data_[offset(idx)]; }
  const T& at(std::initializer_list<std::size_t> idx) const { return data_[offset(idx)]; }

  void fill(T v) {
    if (!device().is_cuda()) {
      std::fill_n(data(), numel(), v);
      return;
    }
    Tensor host(shape_);
    host.fill(v);
    copy_bytes(data(), host.data(), numel() * sizeof(T), 0);
  }

  // Row-major strides in elements, as a Shape (e.g. [768, 1] for [64, 768]): a Tensor is
  // always contiguous. dtype(): the element type's name, "f32", "f64", "bf16" or "f16".
  Shape strides() const {
    Shape s = shape_;
    std::size_t step = 1;
    for (int d = rank() - 1; d >= 0; --d) {
      s[d] = step;
      step *= shape_[d];
    }
    return s;
  }
  static constexpr const char* dtype() { return dtype_name<T>(); }

  // The value of a one-element tensor (any rank), copied to the host from a CUDA tensor.
  T item() const {
    if (numel() != 1)
      throw ShapeError("item: the tensor has shape " + shape_.str() + " (" + std::to_string(numel()) +
                       " elements); item() needs exactly one element");
    if (!is_cuda()) return data_[0];
    T v;
    copy_bytes(&v, data(), sizeof(T), 1);
    return v;
  }

  // Copies src's values into this tensor's memory, in place (a view writes through to the memory
  // it views). Any pair of devices; the shapes must be equal. A copy from or to the host is
  // complete on return; one between CUDA tensors is queued on kiln::cuda::stream().
  void copy_from(const Tensor& src) {
    if (!(src.shape_ == shape_))
      throw ShapeError("copy_from: the source has shape " + src.shape_.str() + ", the destination " + shape_.str());
    const std::size_t bytes = numel() * sizeof(T);
    if (bytes == 0 || src.data() == data()) return;
    if (!is_cuda() && !src.is_cuda()) std::memmove(data(), src.data(), bytes);
    else copy_bytes(data(), src.data(), bytes, src.is_cuda() ? (is_cuda() ? 2 : 1) : 0);
  }
  template <class U>
  void copy_from(const Tensor<U>&) {
    static_assert(std::is_same_v<U, T>,
                  "kiln::Tensor::copy_from: the element types differ; convert the source first, e.g. src.as<float>()");
  }

  // A tensor over `data`, which it does not own and never frees (kiln::from_eigen makes one).
  // The memory must hold shape.numel() elements, row-major, on `device`, and outlive the view
  // and every tensor it is moved into. A copy of a view is a deep copy that owns its memory;
  // assigning to a view rebinds it (copy_from writes through it).
  static Tensor view(T* data, const Shape& shape, Device device = Device::cpu()) {
    Tensor t;
    t.shape_ = shape;
    t.numel_ = detail::tensor_bytes(shape, sizeof(T)) / sizeof(T);
    t.data_ = std::unique_ptr<T[], detail::AlignedDelete>(data, detail::AlignedDelete{0, device, false});
    return t;
  }
  bool is_view() const { return !data_.get_deleter().owns; }

  // Eigen maps of this tensor's memory, row-major, no copy: defined in
  // <kiln/core/eigen_interop.hpp> (included by <kiln/kiln.hpp>).
  auto as_eigen_matrix() { return eigen_matrix_map(*this); }
  auto as_eigen_matrix() const { return eigen_matrix_map(*this); }
  template <int R>
  auto as_eigen_tensor() {
    return eigen_tensor_map<R>(*this);
  }
  template <int R>
  auto as_eigen_tensor() const {
    return eigen_tensor_map<R>(*this);
  }

 private:
  [[noreturn]] KILN_NOINLINE void throw_on_device(const char* what) const {
    throw DeviceError(std::string("kiln::Tensor::") + what + ": the tensor is on " + device().str() +
                      "; its elements are not in host memory: copy it with .cpu() first");
  }
  // bytes = numel * sizeof(T), already checked by detail::tensor_bytes.
  Tensor(const Shape& shape, std::size_t bytes, Device device)
      : shape_(shape), numel_(bytes / sizeof(T)), data_(allocate(bytes, device), detail::AlignedDelete{bytes, device}) {}
  static T* allocate(std::size_t bytes, Device device) {
    if (!device.is_cuda()) return static_cast<T*>(detail::aligned_alloc_bytes(bytes));
    return static_cast<T*>(detail::cuda_hooks_or_throw("kiln::Tensor on cuda").allocate(bytes, device.index));
  }
  static void copy_bytes(void* dst, const void* src, std::size_t bytes, int kind) {
    if (bytes > 0) detail::cuda_hooks_or_throw("kiln::Tensor copy to or from cuda").copy(dst, src, bytes, kind);
  }
  std::size_t offset(std::initializer_list<std::size_t> idx) const {
    if (device().is_cuda()) throw DeviceError("kiln::Tensor::at: the tensor is on " + device().str() + "; copy it with .cpu() first");
    if (idx.size() != shape_.size())
      throw std::out_of_range("kiln::Tensor::at: " + std::to_string(idx.size()) + " indices for shape " + shape_.str() +
                              ", which has rank " + std::to_string(shape_.size()));
    std::size_t off = 0, d = 0;
    for (std::size_t i : idx) {
      if (i >= shape_[d])
        throw std::out_of_range("kiln::Tensor::at: index " + std::to_string(i) + " on axis " + std::to_string(d) +
                                " is out of range for shape " + shape_.str());
      off = off * shape_[d++] + i;
    }
    return off;
  }
  Shape shape_;
  std::size_t numel_ = 0;  // shape_.numel(), computed (and checked) once
  std::unique_ptr<T[], detail::AlignedDelete> data_;
};

}  // namespace kiln
