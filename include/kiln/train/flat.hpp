// kiln: the trainer's state in four flat buffers: the parameters, AdamW's two moments and the
// gradients, each kind one device buffer holding every parameter's tensor one after the other
// (in the engine's for_each_parameter order), each tensor a view of its part. With that layout
// the gradient norm is one reduction and AdamW one pointwise kernel over a whole buffer
// (train/step.hpp's ParameterUpdate) instead of a reduction and an update per parameter: on a
// GPU, where a small model's ~50 parameters made ~200 kernels of a few microseconds each, that
// is most of the update's time.
//
// Layout: part i starts at offsets[i], a multiple of kAlign elements (so a GEMM writing a
// gradient in place gets an aligned pointer); the gaps between parts are zero in every buffer
// and nobody writes them, and AdamW maps a zero parameter with zero moments and zero gradient to
// zero, so an update over the whole buffer leaves them zero and adds nothing to the norm.
#pragma once
#include <array>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/distributed/buckets.hpp"

namespace kiln::train {

template <class T>
class FlatState {
 public:
  enum Kind : std::size_t { kParam, kExpAvg, kExpAvgSq, kGrad, kKinds };
  static constexpr std::size_t kAlign = 16;

  // The parts, by name and shape, in order; every buffer zero.
  FlatState(const std::vector<std::pair<std::string, Shape>>& parts, Device device) : device_(device) {
    for (const auto& [name, shape] : parts) {
      if (!index_.emplace(name, shapes_.size()).second)
        throw ValueError("kiln::train::FlatState: the parameter \"" + name + "\" is named twice");
      shapes_.push_back(shape), names_.push_back(name), offsets_.push_back(size_);
      size_ += (shape.numel() + kAlign - 1) / kAlign * kAlign;
    }
    for (auto& b : buffers_) b = zeros<T>(Shape{size_}, device);
  }

  std::size_t parts() const { return names_.size(); }
  const std::string& name(std::size_t i) const { return names_[i]; }
  // Where part i lies in each buffer: elements [offset(i), offset(i) + shape(i).numel()).
  std::size_t offset(std::size_t i) const { return offsets_[i]; }
  const Shape& shape(std::size_t i) const { return shapes_[i]; }
  // Part i of buffer k, a view with the part's shape.
  Tensor<T> view(Kind k, std::size_t i) { return Tensor<T>::view(buffers_[k].data() + offsets_[i], shapes_[i], device_); }
  Tensor<T> view(Kind k, const std::string& name) { return view(k, index_.at(name)); }
  bool has(const std::string& name) const { return index_.count(name) != 0; }
  // Every part of buffer k, by prefix + its name (moved into a map, they stay views).
  std::map<std::string, Tensor<T>> views(Kind k, const std::string& prefix = "") {
    std::map<std::string, Tensor<T>> m;
    for (std::size_t i = 0; i < names_.size(); ++i) m.emplace(prefix + names_[i], view(k, i));
    return m;
  }
  // The whole of buffer k, gaps included, as one vector.
  Tensor<T> whole(Kind k) { return Tensor<T>::view(buffers_[k].data(), Shape{size_}, device_); }

  // The sums over the ranks of the gradient buffer, in buckets of at most cap_bytes
  // (distributed/buckets.hpp), the parts finished in the reverse of their order: a stack of
  // layers finishes the head's gradients first and the embedding's last; one program finishes
  // them all at once, in any order.
  distributed::Reducer<T> gradient_reducer(distributed::Communicator& comm, std::size_t cap_bytes) const {
    std::vector<distributed::GradientPart> parts;
    std::vector<std::size_t> finished;
    for (std::size_t i = 0; i < names_.size(); ++i) parts.push_back({names_[i], offsets_[i], shapes_[i].numel()});
    for (std::size_t i = names_.size(); i-- > 0;) finished.push_back(i);
    return distributed::Reducer<T>(comm, std::move(parts), finished, cap_bytes);
  }

  // Whether `tensors` holds, under prefix + each part's name, exactly part i of buffer k (no
  // entry rebound to other memory, none missing); entries of other names are allowed.
  template <class Named>
  bool holds(Kind k, const Named& tensors, const std::string& prefix = "") const {
    for (std::size_t i = 0; i < names_.size(); ++i) {
      const auto it = tensors.find(prefix + names_[i]);
      if (it == tensors.end() || it->second.data() != buffers_[k].data() + offsets_[i] || !(it->second.shape() == shapes_[i]))
        return false;
    }
    return true;
  }

 private:
  Device device_;
  std::vector<std::string> names_;
  std::vector<Shape> shapes_;
  std::vector<std::size_t> offsets_;
  std::map<std::string, std::size_t> index_;
  std::size_t size_ = 0;
  std::array<Tensor<T>, kKinds> buffers_;
};

}  // namespace kiln::train
