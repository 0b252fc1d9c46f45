// kiln: the Trainer's side of a data-parallel run (docs/distributed.md): the ranks it trains
// with, what it sums over them (the gradients in buckets, losses, sample counts), rank 0's
// weights on every rank at the start, and each rank's share of an epoch's samples. A Trainer
// that is not distributed holds a Ranks of no communicator: one rank, every sum the identity.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/device.hpp"
#include "kiln/core/dtype.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/shape.hpp"
#include "kiln/distributed/buckets.hpp"
#include "kiln/distributed/connect.hpp"
#include "kiln/train/arguments.hpp"
#include "kiln/train/flat.hpp"

namespace kiln::train {

template <class T>
class Ranks {
 public:
  Ranks() = default;
  explicit Ranks(std::shared_ptr<distributed::Communicator> comm) : comm_(std::move(comm)) {}

  // The communicator of the ranks of env (none for a run of one process), after a rendezvous
  // that checks that every rank trains parameters `parts` with the same arguments.
  static std::shared_ptr<distributed::Communicator> connect(const distributed::Environment& env, const TrainingArguments& args,
                                                            Device device, const std::vector<std::pair<std::string, Shape>>& parts) {
    return distributed::connect(env, args.ddp_backend, device, fingerprint(parts) + fingerprint(args, device),
                                std::chrono::milliseconds(static_cast<long long>(args.ddp_timeout * 1000)));
  }

  int rank() const { return comm_ ? comm_->rank() : 0; }
  int size() const { return comm_ ? comm_->size() : 1; }
  // The gradients' sums, bucket by bucket, for the step (null when not distributed).
  distributed::Reducer<T>* reducer() const { return reducer_.get(); }
  std::vector<distributed::Bucket> buckets() const { return reducer_ ? reducer_->buckets() : std::vector<distributed::Bucket>{}; }

  // With the other ranks: plans the buckets of the gradient sums (at most cap_mb each) and puts
  // rank 0's weights on every rank (the others' set to zero, then summed). A communicator of one
  // rank takes the same path, so that one GPU runs every NCCL call a data-parallel step makes.
  void join(FlatState<T>& flat, double cap_mb, Device device) {
    if (!comm_) return;
    const auto cap = static_cast<std::size_t>(cap_mb * 1024 * 1024);
    reducer_ = std::make_unique<distributed::Reducer<T>>(flat.gradient_reducer(*comm_, std::max<std::size_t>(cap, 1)));
    Tensor<T> weights = flat.whole(FlatState<T>::kParam);
    if (comm_->rank() != 0) weights.fill(T(0));
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) comm_->all_reduce_sum(weights.data(), weights.numel(), device);
    comm_->synchronize();
  }

  // A ValueError on every rank unless every rank has `n` samples (each rank takes its share of
  // the same data: different data would give ranks different numbers of steps, and the ones
  // that stop first would leave the others waiting).
  void check_same_size(std::size_t n, const char* who) const {
    if (size() < 2) return;
    double sums[2] = {static_cast<double>(n), static_cast<double>(n) * static_cast<double>(n)};
    comm_->all_reduce_host(sums, 2);
    if (sums[1] * size() != sums[0] * sums[0])  // sum n^2 = (sum n)^2 / W only when all are equal
      throw ValueError(std::string(who) + ": the ranks' datasets differ in size (this rank has " + std::to_string(n) +
                       " samples, the mean is " + std::to_string(sums[0] / size()) +
                       "): give every rank the same data, the Trainer takes each rank's share of it");
  }

  // The sum and the mean of a value over the ranks.
  double sum(double v) const {
    if (size() > 1) comm_->all_reduce_host(&v, 1);
    return v;
  }
  double mean(double v) const { return sum(v) / static_cast<double>(size()); }

  // This rank's share of an epoch's `order` (the same on every rank): all of it, or in a run of
  // W ranks its samples r, r + W, r + 2W, ... of the order repeated to a multiple of W, as
  // torch's DistributedSampler takes them.
  std::vector<std::size_t> share(std::vector<std::size_t> order) const {
    const auto W = static_cast<std::size_t>(size()), r = static_cast<std::size_t>(rank());
    if (W == 1) return order;  // moved out, not copied
    const std::size_t all = order.size();
    std::vector<std::size_t> mine((all + W - 1) / W);
    for (std::size_t j = 0; j < mine.size(); ++j) mine[j] = order[(j * W + r) % all];
    return mine;
  }

 private:
  // What must be the same on every rank: the parameters and the training arguments that shape
  // a step or the data order. One line each, so that the rendezvous's error names the first that
  // differs.
  static std::string fingerprint(const std::vector<std::pair<std::string, Shape>>& parts) {
    std::string f = std::string("element ") + dtype_name<T>() + "\n";
    for (const auto& [name, shape] : parts) f += "parameter " + name + " " + shape.str() + "\n";
    return f;
  }
  static std::string fingerprint(const TrainingArguments& a, Device device) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "per_device_train_batch_size %ld\ngradient_accumulation_steps %ld\nmax_steps %ld\nnum_train_epochs %.17g\n"
                  "seed %llu\nlearning_rate %.17g\nlr_scheduler_type %s\nwarmup_steps %ld\nweight_decay %.17g\n"
                  "max_grad_norm %.17g\ndataloader_drop_last %d\nbf16 %d\nddp_bucket_cap_mb %.17g\n"
                  "eval_steps %ld\nper_device_eval_batch_size %ld\nddp_backend %s\ndevice %s\n",
                  a.per_device_train_batch_size, a.gradient_accumulation_steps, a.max_steps, a.num_train_epochs,
                  static_cast<unsigned long long>(a.seed), a.learning_rate, a.lr_scheduler_type.c_str(), a.warmup_steps,
                  a.weight_decay, a.max_grad_norm, a.dataloader_drop_last ? 1 : 0, a.bf16 ? 1 : 0, a.ddp_bucket_cap_mb,
                  a.eval_steps, a.per_device_eval_batch_size, distributed::backend_for(a.ddp_backend, device).c_str(),
                  device.is_cuda() ? "cuda" : "cpu");
    return line;
  }

  std::shared_ptr<distributed::Communicator> comm_;
  std::unique_ptr<distributed::Reducer<T>> reducer_;
};

}  // namespace kiln::train
