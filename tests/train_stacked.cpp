// kiln::Trainer on a stack of layers (train/stacked.hpp), compiled region by region: its updates
// equal those of the same model compiled as one program (float64, to rounding), a weight shared
// by the embedding and the head gets the sum of both gradients, and a run saved and resumed gives
// the bits of one that is not. The one-program model is built from the same layer expression
// with kiln::prefix_params and kiln::substitute.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "kiln/expr/substitute.hpp"
#include "kiln/train/trainer.hpp"

namespace {
namespace fs = std::filesystem;
using kiln::Shape;
using kiln::Tensor;

// h_0 = x w_in;  h_{l+1} = h_l + tanh(h_l w + b) (weights "layer<l>.w", "layer<l>.b");
// loss = mean((h_L w_out - y)^2) + 0.01 mean(w_in^2)   (w_in read by the embedding and the head)
struct Parts {
  using element = double;
  static constexpr auto x = kiln::input<"x", 2, double>();
  static constexpr auto y = kiln::input<"y", 2, double>();
  static constexpr auto h = kiln::input<"h", 2, double>();
  static constexpr auto w_in = kiln::param<"w_in", 2, double>();
  static constexpr auto w_out = kiln::param<"w_out", 2, double>();
  static constexpr auto w = kiln::param<"w", 2, double>();
  static constexpr auto b = kiln::param<"b", 1, double>();
  static constexpr auto embed() { return kiln::matmul(x, w_in); }
  static constexpr auto layer() { return h + kiln::tanh(kiln::matmul(h, w) + b); }
  static constexpr auto head_predictions() { return kiln::matmul(h, w_out); }
  static constexpr auto head_loss() {
    return kiln::mean(kiln::square(head_predictions() - y)) + 0.01 * kiln::mean(kiln::square(w_in));
  }
};

struct Stacked : Parts {
  static constexpr int layers = 2;
  static constexpr auto residual = h;
  static constexpr auto embed_parameters() { return std::tuple{w_in}; }
  static constexpr auto layer_parameters() { return std::tuple{w, b}; }
  static constexpr auto head_parameters() { return std::tuple{w_out, w_in}; }
  static std::string layer_prefix(int l) { return "layer" + std::to_string(l) + "."; }
};
static_assert(kiln::train::StackedModel<Stacked>);

struct OneProgram : Parts {
  static constexpr auto parameters() {
    return std::tuple{w_in, w_out, kiln::prefixed<"layer0.">(w), kiln::prefixed<"layer0.">(b), kiln::prefixed<"layer1.">(w),
                      kiln::prefixed<"layer1.">(b)};
  }
  static constexpr auto loss() {
    const auto h1 = kiln::substitute(kiln::prefix_params<kiln::numbered<"layer", 0>()>(layer()), h, embed());
    const auto h2 = kiln::substitute(kiln::prefix_params<kiln::numbered<"layer", 1>()>(layer()), h, h1);
    return kiln::substitute(head_loss(), h, h2);
  }
  static constexpr auto predictions() {
    const auto h1 = kiln::substitute(kiln::prefix_params<kiln::numbered<"layer", 0>()>(layer()), h, embed());
    const auto h2 = kiln::substitute(kiln::prefix_params<kiln::numbered<"layer", 1>()>(layer()), h, h1);
    return kiln::substitute(head_predictions(), h, h2);
  }
};
static_assert(!kiln::train::StackedModel<OneProgram>);
static_assert(kiln::numbered<"layer", 12>().view() == "layer12.");
static_assert(std::is_same_v<decltype(kiln::prefixed<"layer1.">(Parts::w)), decltype(kiln::param<"layer1.w", 2, double>())>);

// n samples of x [3] and y [2] = a smooth function of x plus noise.
struct Data {
  Tensor<double> xs, ys;
  explicit Data(std::size_t n, std::uint64_t seed) : xs(Shape{n, 3}), ys(Shape{n, 2}) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> d;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < 3; ++k) xs[i * 3 + k] = d(rng);
      ys[i * 2] = std::sin(xs[i * 3]) + 0.5 * xs[i * 3 + 1] + 0.1 * d(rng);
      ys[i * 2 + 1] = xs[i * 3 + 2] * xs[i * 3] + 0.1 * d(rng);
    }
  }
  std::size_t size() const { return xs.shape()[0]; }
  struct Batch {
    Tensor<double> x, y;
    auto bindings() const { return std::tuple{Parts::x = x, Parts::y = y}; }
  };
  Batch batch(std::span<const std::size_t> rows) const {
    Batch out{Tensor<double>(Shape{rows.size(), 3}), Tensor<double>(Shape{rows.size(), 2})};
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::copy_n(xs.data() + rows[r] * 3, 3, out.x.data() + r * 3);
      std::copy_n(ys.data() + rows[r] * 2, 2, out.y.data() + r * 2);
    }
    return out;
  }
};

kiln::train::Parameters<double> initial(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, 0.5);
  const auto random = [&](Shape s) {
    Tensor<double> t(s);
    for (std::size_t i = 0; i < t.numel(); ++i) t[i] = d(rng);
    return t;
  };
  return {{"w_in", random({3, 4})},       {"w_out", random({4, 2})}, {"layer0.w", random({4, 4})},
          {"layer0.b", random({4})},      {"layer1.w", random({4, 4})}, {"layer1.b", random({4})}};
}

kiln::TrainingArguments arguments(const std::string& name) {
  kiln::TrainingArguments a;
  a.max_steps = 8, a.per_device_train_batch_size = 5, a.learning_rate = 0.05, a.warmup_steps = 2;
  a.weight_decay = 0.01, a.max_grad_norm = 0.5, a.logging_steps = 1, a.save_steps = 0, a.print_logs = false;
  a.output_dir = (fs::temp_directory_path() / ("kiln_stacked_" + name + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(a.output_dir);
  return a;
}

}  // namespace

TEST_CASE("Trainer: a stack of layers compiled region by region updates as the one-program step does") {
  const Data data(23, 5);
  const auto args = arguments("regions");
  kiln::Trainer<Stacked> regions(args, initial(9));
  kiln::Trainer<OneProgram> whole(args, initial(9));
  regions.train(data);
  whole.train(data);
  for (const auto& [name, t] : whole.parameters()) {
    const auto a = regions.parameters().at(name).cpu(), b = t.cpu();
    for (std::size_t i = 0; i < a.numel(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
  }
  REQUIRE(regions.log_history().size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    CHECK(regions.log_history()[i].loss == doctest::Approx(whole.log_history()[i].loss).epsilon(1e-12));
    CHECK(regions.log_history()[i].grad_norm == doctest::Approx(whole.log_history()[i].grad_norm).epsilon(1e-12));
  }
  CHECK(regions.log_history()[0].grad_norm > 0.5);  // the bound clips the first steps
  CHECK(regions.evaluate(data) == doctest::Approx(whole.evaluate(data)).epsilon(1e-12));
  const auto p = regions.predict(data), q = whole.predict(data);
  REQUIRE(p.predictions.shape() == Shape{23, 2});
  for (std::size_t i = 0; i < p.predictions.numel(); ++i)
    CHECK(p.predictions[i] == doctest::Approx(q.predictions[i]).epsilon(1e-12));
  CHECK(p.loss == doctest::Approx(q.loss).epsilon(1e-12));
  CHECK(regions.explain().find("layer (vector-Jacobian product):") != std::string::npos);
}

TEST_CASE("Trainer: a stack of layers saved and resumed gives the bits of one that is not") {
  const Data data(17, 6);
  auto args = arguments("whole");
  args.save_steps = 3;
  kiln::Trainer<Stacked> whole(args, initial(10));
  whole.train(data);
  auto again = arguments("resumed");
  kiln::Trainer<Stacked> resumed(again, initial(11));
  resumed.train(data, kiln::train::NoData{}, args.output_dir + "/checkpoint-3");
  for (const auto& [name, t] : whole.parameters()) {
    const auto a = resumed.parameters().at(name).cpu(), b = t.cpu();
    CHECK(std::memcmp(a.data(), b.data(), a.numel() * sizeof(double)) == 0);
  }
  fs::remove_all(args.output_dir), fs::remove_all(again.output_dir);
}

TEST_CASE("Trainer: gradient accumulation over K batches updates as one batch K times larger") {
  // 20 samples: batches of 10, or of 5 taken 2 at a time, cover the same samples per update
  // (one epoch order), and a mean over 10 is the mean of two means over 5.
  const Data data(20, 7);
  auto one = arguments("one_batch");
  one.per_device_train_batch_size = 10, one.max_steps = 6;
  auto accumulated = arguments("accumulated");
  accumulated.per_device_train_batch_size = 5, accumulated.gradient_accumulation_steps = 2, accumulated.max_steps = 6;
  kiln::Trainer<OneProgram> reference(one, initial(12));
  kiln::Trainer<OneProgram> whole(accumulated, initial(12));
  kiln::Trainer<Stacked> regions(accumulated, initial(12));
  reference.train(data);
  whole.train(data);
  regions.train(data);
  const auto same = [&](const auto& trainer) {
    CHECK(trainer.global_step() == 6);
    for (const auto& [name, t] : reference.parameters()) {
      const auto a = trainer.parameters().at(name).cpu(), b = t.cpu();
      for (std::size_t i = 0; i < a.numel(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
    }
    REQUIRE(trainer.log_history().size() == 6);
    for (std::size_t i = 0; i < 6; ++i) {
      CHECK(trainer.log_history()[i].loss == doctest::Approx(reference.log_history()[i].loss).epsilon(1e-12));
      CHECK(trainer.log_history()[i].grad_norm == doctest::Approx(reference.log_history()[i].grad_norm).epsilon(1e-12));
      CHECK(trainer.log_history()[i].epoch == reference.log_history()[i].epoch);
    }
  };
  same(whole);
  same(regions);
  CHECK(reference.log_history()[0].grad_norm > 0.5);  // clipping is part of what agrees
  for (const auto& d : {one.output_dir, accumulated.output_dir}) fs::remove_all(d);
}

TEST_CASE("Trainer: gradient accumulation at an epoch's end takes the batches left") {
  // 15 samples: batches of 10 (10, then 5), or of 5 taken 2 at a time (10, then the 5 left,
  // as one batch whose gradient is not halved): the same updates.
  const Data data(15, 8);
  auto one = arguments("one_batch_partial");
  one.per_device_train_batch_size = 10, one.max_steps = 4;
  auto accumulated = arguments("accumulated_partial");
  accumulated.per_device_train_batch_size = 5, accumulated.gradient_accumulation_steps = 2, accumulated.max_steps = 4;
  kiln::Trainer<OneProgram> reference(one, initial(13));
  kiln::Trainer<Stacked> regions(accumulated, initial(13));
  reference.train(data);
  regions.train(data);
  for (const auto& [name, t] : reference.parameters()) {
    const auto a = regions.parameters().at(name).cpu(), b = t.cpu();
    for (std::size_t i = 0; i < a.numel(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
  }
  REQUIRE(regions.log_history().size() == 4);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(regions.log_history()[i].grad_norm == doctest::Approx(reference.log_history()[i].grad_norm).epsilon(1e-12));
  CHECK(regions.log_history()[3].epoch == 2.0);  // two updates per epoch of three batches
  for (const auto& d : {one.output_dir, accumulated.output_dir}) fs::remove_all(d);
}

TEST_CASE("Trainer: a run with gradient accumulation resumes to the bit; a checkpoint of another batch size is refused") {
  const Data data(20, 9);
  auto args = arguments("accumulated_whole");
  args.per_device_train_batch_size = 5, args.gradient_accumulation_steps = 2, args.max_steps = 6, args.save_steps = 3;
  kiln::Trainer<Stacked> whole(args, initial(14));
  whole.train(data);
  auto again = arguments("accumulated_resumed");
  again.per_device_train_batch_size = 5, again.gradient_accumulation_steps = 2, again.max_steps = 6;
  kiln::Trainer<Stacked> resumed(again, initial(15));
  resumed.train(data, kiln::train::NoData{}, args.output_dir + "/checkpoint-3");
  for (const auto& [name, t] : whole.parameters()) {
    const auto a = resumed.parameters().at(name).cpu(), b = t.cpu();
    CHECK(std::memcmp(a.data(), b.data(), a.numel() * sizeof(double)) == 0);
  }
  // checkpoint-3 stopped after batch 2 of 4 in its second epoch; with batches of 20 an epoch
  // has one batch.
  auto other = arguments("other_batch");
  other.per_device_train_batch_size = 20, other.max_steps = 6;
  kiln::Trainer<Stacked> wrong(other, initial(16));
  CHECK_THROWS_WITH_AS(wrong.train(data, kiln::train::NoData{}, args.output_dir + "/checkpoint-3"),
                       doctest::Contains("stopped after batch 2 of its epoch, which has 1 batches"), kiln::ValueError);
  for (const auto& d : {args.output_dir, again.output_dir, other.output_dir}) fs::remove_all(d);
}
