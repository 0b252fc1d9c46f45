// kiln: the parts of kiln::Trainer's loop that know nothing of models: the batches of an epoch
// made one ahead on another thread (Prefetch), their tensors kept on the device (StaticBatch),
// host tensors stacked along their first axis (concat_rows), and the run's clock, throughput
// and progress bar (Progress).
#pragma once
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <future>
#include <tuple>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/tensor.hpp"
#include "kiln/expr/node.hpp"

namespace kiln::train {

// The batches of an epoch's order, each made on another thread while the step before it runs
// (so a dataset's batch() must be safe to call from another thread, as a const function that
// only reads the data is). The order must stay unchanged while a batch of it is being made, so
// the trainer asks for the next batch only within an epoch: a batch made ahead is always the
// next one taken, from the same order.
template <class D>
class Prefetch {
  using Batch = decltype(std::declval<const D&>().batch(std::span<const std::size_t>{}));

 public:
  Prefetch(const D& data, std::size_t n, std::size_t batch) : data_(data), n_(n), batch_(batch) {}
  // Batch b of `order` (its rows b B .. min((b + 1) B, n)); then starts making batch b + 1 when
  // `more` says there is one in this epoch.
  Batch take(const std::vector<std::size_t>& order, std::size_t b, bool more) {
    Batch out = next_.valid() && next_index_ == b ? next_.get() : make(order, b);
    if (more) {
      next_ = std::async(std::launch::async, [this, &order, b] { return make(order, b + 1); });
      next_index_ = b + 1;
    }
    return out;
  }

 private:
  Batch make(const std::vector<std::size_t>& order, std::size_t b) const {
    const std::size_t first = b * batch_;
    return data_.batch(std::span(order).subspan(first, std::min(batch_, n_ - first)));
  }
  const D& data_;
  std::size_t n_, batch_;
  std::future<Batch> next_;
  std::size_t next_index_ = 0;
};

// Host tensors of one shape but the first extent, one after the other along the first axis.
template <class U>
Tensor<U> concat_rows(const std::vector<Tensor<U>>& parts, const char* who) {
  Shape shape = parts.at(0).shape();
  if (shape.size() == 0) throw ShapeError(std::string(who) + ": the predictions are scalars; they need a batch axis to concatenate");
  std::size_t rows = 0;
  for (const auto& p : parts) {
    const Shape rest = p.shape();
    bool same = rest.size() == shape.size();
    for (std::size_t d = 1; same && d < shape.size(); ++d) same = rest[d] == shape[d];
    if (!same)
      throw ShapeError(std::string(who) + ": batches give predictions of shapes " + shape.str() + " and " + rest.str() +
                       ", which differ beyond the first axis");
    rows += p.shape()[0];
  }
  shape[0] = rows;
  Tensor<U> out(shape);
  std::size_t at = 0;
  for (const auto& p : parts) {
    std::copy_n(p.data(), p.numel(), out.data() + at);
    at += p.numel();
  }
  return out;
}

// The clock of a training run, its throughput since the last record, and on a terminal (stdout a
// TTY, and not disable_tqdm) a progress bar redrawn at most ten times a second:
//    37% |######          | 925/2500 [01:12<02:03, 12.81 steps/s, loss 1.942]
// Lines printed while the bar shows go above it.
class Progress {
 public:
  using Clock = std::chrono::steady_clock;
  void start(long step, long total, bool bar) {
    first_ = step, total_ = total, bar_ = bar && ::isatty(STDOUT_FILENO) == 1;
    start_ = last_record_ = last_draw_ = Clock::now();
    steps_ = 0, samples_ = 0, total_samples_ = 0, shown_ = false;
  }
  void count(double samples) { ++steps_, samples_ += samples, total_samples_ += samples; }
  // Steps and samples per second since the last call (or the start).
  std::pair<double, double> rates() {
    const auto now = Clock::now();
    const double dt = std::max(std::chrono::duration<double>(now - last_record_).count(), 1e-9);
    const std::pair<double, double> r{static_cast<double>(steps_) / dt, samples_ / dt};
    last_record_ = now, steps_ = 0, samples_ = 0;
    return r;
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  double samples() const { return total_samples_; }
  void update(long step, double loss) {
    step_ = step, loss_ = loss;
    const auto now = Clock::now();
    if (bar_ && (now - last_draw_ > std::chrono::milliseconds(100) || step == total_)) draw(), last_draw_ = now;
  }
  void print(const char* line) {
    if (shown_) std::printf("\r\033[K");
    std::printf("%s\n", line);
    if (shown_) draw();
    std::fflush(stdout);
  }
  void finish() {
    if (shown_) std::printf("\n");
    shown_ = false;
    std::fflush(stdout);
  }

 private:
  static std::string clock(double s) {
    const long t = static_cast<long>(s + 0.5);
    char b[32];
    if (t >= 3600) std::snprintf(b, sizeof b, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else std::snprintf(b, sizeof b, "%02ld:%02ld", t / 60, t % 60);
    return b;
  }
  void draw() {
    const double done = static_cast<double>(step_ - first_), elapsed = seconds();
    const double rate = done / std::max(elapsed, 1e-9);
    const double frac = total_ > 0 ? static_cast<double>(step_) / static_cast<double>(total_) : 1.0;
    constexpr int width = 16;  // the line stays within 80 columns up to 6-digit step counts
    const int filled = static_cast<int>(frac * width);
    std::printf("\r%3d%% |%s%s| %ld/%ld [%s<%s, %.2f steps/s, loss %.3f]", static_cast<int>(frac * 100),
                std::string(static_cast<std::size_t>(filled), '#').c_str(), std::string(static_cast<std::size_t>(width - filled), ' ').c_str(),
                step_, total_, clock(elapsed).c_str(),
                done > 0 ? clock(static_cast<double>(total_ - step_) / std::max(rate, 1e-9)).c_str() : "?", rate, loss_);
    std::fflush(stdout);
    shown_ = true;
  }
  long first_ = 0, total_ = 0, step_ = 0, steps_ = 0;
  double loss_ = 0, samples_ = 0, total_samples_ = 0;
  bool bar_ = false, shown_ = false;
  Clock::time_point start_, last_record_, last_draw_;
};

// The tensors of a dataset's batches on a device, kept from batch to batch (a new buffer only
// where the shape changes, so that a CUDA-graph policy replays one graph per batch shape): a
// binding to each.
template <class D>
class StaticBatch {
  using Fresh = decltype(std::declval<const D&>().batch(std::span<const std::size_t>{}).bindings());
  template <class B>
  struct Slot;
  template <std::uint64_t Id, class U, class N>
  struct Slot<Binding<Id, U, N>> {
    Tensor<U> tensor;
    Binding<Id, U, N> bind() const { return {&tensor}; }
  };
  template <class Tuple>
  struct Slots;
  template <class... Bs>
  struct Slots<std::tuple<Bs...>> {
    using type = std::tuple<Slot<std::remove_cvref_t<Bs>>...>;
    using bound = std::tuple<std::remove_cvref_t<Bs>...>;
  };

 public:
  explicit StaticBatch(Device device) : device_(device) {}
  template <class Batch>
  const typename Slots<Fresh>::bound& load(const Batch& fresh) {
    const auto b = fresh.bindings();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((copy_in(std::get<I>(slots_).tensor, *std::get<I>(b).tensor)), ...);
      bound_ = {std::get<I>(slots_).bind()...};
    }(std::make_index_sequence<std::tuple_size_v<Fresh>>{});
    return bound_;
  }

 private:
  template <class U>
  void copy_in(Tensor<U>& dst, const Tensor<U>& src) {
    if (!(dst.shape() == src.shape()) || dst.numel() == 0) dst = Tensor<U>(src.shape(), device_);
    dst.copy_from(src);
  }
  Device device_;
  typename Slots<Fresh>::type slots_;
  typename Slots<Fresh>::bound bound_;
};

}  // namespace kiln::train
