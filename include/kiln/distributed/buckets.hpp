// kiln: the gradient all-reduce of a data-parallel step in buckets, as PyTorch's DDP does it:
// the gradients are grouped, in the order the backward finishes them, into buckets of about
// ddp_bucket_cap_mb, and each bucket is summed over the ranks as soon as its last gradient is
// written, while the backward goes on with the layers before it.
//
// Layout. The gradients live in one flat buffer (train/flat.hpp): part i at offset_i, parts in
// the parameters' order. A bucket is a run of parts adjacent in that buffer, so its sum is one
// call over one range of memory, with no copy in or out; the zero gaps between parts (alignment)
// are summed along and stay zero. A stack of layers finishes its gradients in the reverse of the
// parameters' order (the head's, then the last layer's, ..., then the embedding's), so each
// bucket is a run of consecutive parts read backwards.
//
// Buckets: walking the parts in the order they are finished, a part joins the current bucket when
// it is adjacent to it and the bucket's range stays within the cap; otherwise it starts the next
// bucket (a part larger than the cap is a bucket of its own). Every rank computes the same plan
// from the same parts, so the ranks' calls match one for one.
#pragma once
#include <algorithm>
#include <cstddef>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/distributed/communicator.hpp"

namespace kiln::distributed {

struct GradientPart {
  std::string name;
  std::size_t offset = 0, count = 0;  // elements of the flat buffer
};

struct Bucket {
  std::size_t begin = 0, end = 0;  // the range of the flat buffer it sums
  std::vector<std::size_t> parts;  // indices into the parts, in the order they are finished
};

// The buckets of `parts` (by their index in the flat buffer), `finished` listing the indices in
// the order the backward finishes them, with at most cap_bytes per bucket.
inline std::vector<Bucket> plan_buckets(const std::vector<GradientPart>& parts, const std::vector<std::size_t>& finished,
                                        std::size_t element_bytes, std::size_t cap_bytes) {
  if (finished.size() != parts.size())
    throw ValueError("kiln::distributed::plan_buckets: " + std::to_string(finished.size()) + " parts in the finishing order, " +
                     std::to_string(parts.size()) + " parts");
  std::vector<Bucket> buckets;
  std::size_t lo = 0, hi = 0;  // the current bucket's parts are lo .. hi (flat indices)
  for (const std::size_t i : finished) {
    if (i >= parts.size()) throw ValueError("kiln::distributed::plan_buckets: part index " + std::to_string(i) + " out of range");
    const GradientPart& p = parts[i];
    if (!buckets.empty()) {
      Bucket& b = buckets.back();
      const bool adjacent = i + 1 == lo || i == hi + 1;
      const std::size_t begin = std::min(b.begin, p.offset), end = std::max(b.end, p.offset + p.count);
      if (adjacent && (end - begin) * element_bytes <= cap_bytes) {
        b.begin = begin, b.end = end, b.parts.push_back(i);
        lo = std::min(lo, i), hi = std::max(hi, i);
        continue;
      }
    }
    buckets.push_back({p.offset, p.offset + p.count, {i}});
    lo = hi = i;
  }
  return buckets;
}

// Sums the buckets of one flat gradient buffer over the ranks as their parts are finished:
// start() at the step's beginning, ready(name) after the last gradient of `name` is written,
// finish() once the backward is done (it sums the buckets not yet summed, in order). Buckets are summed
// strictly in plan order, each as soon as it and every bucket before it are complete.
template <class T>
class Reducer {
 public:
  Reducer(Communicator& comm, std::vector<GradientPart> parts, const std::vector<std::size_t>& finished, std::size_t cap_bytes)
      : comm_(&comm), parts_(std::move(parts)), buckets_(plan_buckets(parts_, finished, sizeof(T), cap_bytes)) {
    for (std::size_t i = 0; i < parts_.size(); ++i) index_.emplace(parts_[i].name, i);
    bucket_of_.resize(parts_.size());
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      for (std::size_t i : buckets_[b].parts) bucket_of_[i] = b;
  }

  const std::vector<Bucket>& buckets() const { return buckets_; }
  Communicator& communicator() const { return *comm_; }

  // A new step over the gradients at `grads` (the flat buffer, on `device`): nothing finished.
  void start(T* grads, Device device) {
    grads_ = grads, device_ = device, next_ = 0;
    missing_.assign(buckets_.size(), 0);
    for (std::size_t b = 0; b < buckets_.size(); ++b) missing_[b] = buckets_[b].parts.size();
  }
  // The gradient of `name` is finished: sums every bucket now complete, in order.
  void ready(const std::string& name) {
    const auto it = index_.find(name);
    if (it == index_.end()) throw ValueError("kiln::distributed::Reducer: no gradient part is named \"" + name + "\"");
    if (!grads_) throw ValueError("kiln::distributed::Reducer: ready() before start()");
    --missing_[bucket_of_[it->second]];
    while (next_ < buckets_.size() && missing_[next_] == 0) reduce(next_++);
  }
  // Sums what is left (after the backward), and orders every sum of the step before what kiln's
  // stream runs next (the update: Communicator::join). The communicator's synchronize() then
  // waits for them: not here, since a step captured as a CUDA graph must not wait inside it.
  void finish() {
    while (next_ < buckets_.size()) reduce(next_++);
    comm_->join();
    grads_ = nullptr;
  }

 private:
  void reduce(std::size_t b) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>)
      comm_->all_reduce_sum(grads_ + buckets_[b].begin, buckets_[b].end - buckets_[b].begin, device_);
    else
      throw ValueError("kiln::distributed::Reducer: gradients are summed over the ranks in float or double (a 16-bit model "
                       "trains on float master weights: kiln::Trainer keeps them)");
  }

  Communicator* comm_;
  std::vector<GradientPart> parts_;
  std::vector<Bucket> buckets_;
  std::map<std::string, std::size_t> index_;
  std::vector<std::size_t> bucket_of_, missing_;
  std::size_t next_ = 0;
  T* grads_ = nullptr;
  Device device_;
};

}  // namespace kiln::distributed
