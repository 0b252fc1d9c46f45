// kiln::Trainer on the GPU: a stack of layers (train/stacked.hpp) trained in ReduceOverhead,
// whose whole step (every layer's forward and backward, clipping, AdamW on every parameter) is
// one CUDA graph, against the same run in float64 on the CPU: every step's loss and gradient
// norm, and the weights after it; one capture for the run, every later step a replay.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "kiln/train/trainer.hpp"

// Every case here is a GPU case (tests/test_main.cpp runs them with --on-gpu).
TEST_SUITE_BEGIN("gpu");

namespace {
namespace fs = std::filesystem;
using kiln::Shape;
using kiln::Tensor;

// h_0 = x w_in;  h_{l+1} = h_l + tanh(h_l w + b) (weights "layer<l>.w", "layer<l>.b");
// loss = mean((h_L w_out - y)^2) + 0.01 mean(w_in^2)   (w_in read by the embedding and the head)
template <class T>
struct Stack {
  using element = T;
  static constexpr int layers = 3;
  static constexpr auto x = kiln::input<"x", 2, T>();
  static constexpr auto y = kiln::input<"y", 2, T>();
  static constexpr auto h = kiln::input<"h", 2, T>();
  static constexpr auto w_in = kiln::param<"w_in", 2, T>();
  static constexpr auto w_out = kiln::param<"w_out", 2, T>();
  static constexpr auto w = kiln::param<"w", 2, T>();
  static constexpr auto b = kiln::param<"b", 1, T>();
  static constexpr auto residual = h;
  static constexpr auto embed() { return kiln::matmul(x, w_in); }
  static constexpr auto layer() { return h + kiln::tanh(kiln::matmul(h, w) + b); }
  static constexpr auto head_loss() {
    return kiln::mean(kiln::square(kiln::matmul(h, w_out) - y)) + 0.01 * kiln::mean(kiln::square(w_in));
  }
  static constexpr auto embed_parameters() { return std::tuple{w_in}; }
  static constexpr auto layer_parameters() { return std::tuple{w, b}; }
  static constexpr auto head_parameters() { return std::tuple{w_out, w_in}; }
  static std::string layer_prefix(int l) { return "layer" + std::to_string(l) + "."; }
};

constexpr std::size_t kIn = 6, kWidth = 16, kOut = 3;

// n samples: x [kIn] random, y [kOut] a smooth function of x.
template <class T>
struct Data {
  Tensor<T> xs, ys;
  explicit Data(std::size_t n) : xs(Shape{n, kIn}), ys(Shape{n, kOut}) {
    std::mt19937_64 rng(3);
    std::normal_distribution<double> d;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t k = 0; k < kIn; ++k) xs[i * kIn + k] = static_cast<T>(d(rng));
      for (std::size_t k = 0; k < kOut; ++k)
        ys[i * kOut + k] = static_cast<T>(std::sin(static_cast<double>(xs[i * kIn + k])) * static_cast<double>(xs[i * kIn + k + 1]));
    }
  }
  std::size_t size() const { return xs.shape()[0]; }
  struct Batch {
    Tensor<T> x, y;
    auto bindings() const { return std::tuple{Stack<T>::x = x, Stack<T>::y = y}; }
  };
  Batch batch(std::span<const std::size_t> rows) const {
    Batch out{Tensor<T>(Shape{rows.size(), kIn}), Tensor<T>(Shape{rows.size(), kOut})};
    for (std::size_t r = 0; r < rows.size(); ++r) {
      std::copy_n(xs.data() + rows[r] * kIn, kIn, out.x.data() + r * kIn);
      std::copy_n(ys.data() + rows[r] * kOut, kOut, out.y.data() + r * kOut);
    }
    return out;
  }
};

template <class T>
kiln::train::Parameters<T> initial() {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> d(0.0, 0.4);
  const auto random = [&](Shape s) {
    Tensor<T> t(s);
    for (std::size_t i = 0; i < t.numel(); ++i) t[i] = static_cast<T>(d(rng));
    return t;
  };
  kiln::train::Parameters<T> p{{"w_in", random({kIn, kWidth})}, {"w_out", random({kWidth, kOut})}};
  for (int l = 0; l < Stack<T>::layers; ++l) {
    p.emplace(Stack<T>::layer_prefix(l) + "w", random({kWidth, kWidth}));
    p.emplace(Stack<T>::layer_prefix(l) + "b", random({kWidth}));
  }
  return p;
}

kiln::TrainingArguments arguments(const std::string& name) {
  kiln::TrainingArguments a;
  a.max_steps = 25, a.per_device_train_batch_size = 8, a.learning_rate = 0.01, a.warmup_steps = 3;
  a.weight_decay = 0.01, a.max_grad_norm = 1.0, a.logging_steps = 1, a.save_steps = 0, a.print_logs = false;
  a.report_to = "none", a.disable_tqdm = true;
  a.output_dir = (fs::temp_directory_path() / ("kiln_gpu_trainer_" + name + "_" + std::to_string(::getpid()))).string();
  return a;
}

}  // namespace

TEST_CASE("Trainer in ReduceOverhead on the GPU: a stacked model's step is one graph, and agrees with float64") {
  // 40 samples in batches of 8: every batch of the 5 epochs has one shape.
  const Data<float> data(40);
  const Data<double> data64(40);
  kiln::Trainer<Stack<float>, kiln::ReduceOverhead> gpu(arguments("gpu"), initial<float>(), kiln::Device::cuda());
  kiln::Trainer<Stack<double>> cpu(arguments("cpu"), initial<double>());
  gpu.train(data);
  cpu.train(data64);
  REQUIRE(gpu.log_history().size() == 25);
  for (std::size_t i = 0; i < 25; ++i) {
    CAPTURE(i);
    CHECK(gpu.log_history()[i].loss == doctest::Approx(cpu.log_history()[i].loss).epsilon(1e-4));
    CHECK(gpu.log_history()[i].grad_norm == doctest::Approx(cpu.log_history()[i].grad_norm).epsilon(1e-3));
  }
  for (const auto& [name, t] : cpu.parameters()) {
    CAPTURE(name);
    const auto a = gpu.parameters().at(name).cpu();
    for (std::size_t i = 0; i < a.numel(); ++i) CHECK(static_cast<double>(a[i]) == doctest::Approx(t[i]).epsilon(1e-3).scale(1e-4));
  }
  // step 1 runs the programs directly, step 2 captures the step, steps 3-25 replay it
  CHECK(gpu.graph_captures() == 1);
  CHECK(gpu.graph_replays() == 23);
}

TEST_SUITE_END();
