// kiln::Trainer on the GPU: a stack of layers (train/stacked.hpp) trained in ReduceOverhead,
// whose whole step (every layer's forward and backward, clipping, AdamW on every parameter) is
// one CUDA graph, against the same run in float64 on the CPU: every step's loss and gradient
// norm, and the weights after it; one capture for the run, every later step a replay. The same
// for a bf16 model trained on float master weights (mixed precision, train/mixed.hpp).
#include <doctest/doctest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <random>

#include "../stacked_models.hpp"

// Every case here is a GPU case (tests/test_main.cpp runs them with --on-gpu).
TEST_SUITE_BEGIN("gpu");

namespace {
namespace fs = std::filesystem;
using kiln::Shape;
using kiln::Tensor;

// tests/stacked_models.hpp's residual stack of tanh layers, 3 layers deep.
template <class T>
using Stack = kiln::test::Stacked<T, 3>;

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
        ys[i * kOut + k] = static_cast<T>(std::sin(static_cast<double>(kiln::widen(xs[i * kIn + k]))) *
                                         static_cast<double>(kiln::widen(xs[i * kIn + k + 1])));
    }
  }
  std::size_t size() const { return xs.shape()[0]; }
  struct Batch {
    Tensor<T> x, y;
    auto bindings() const { return std::tuple{Stack<T>::x = x, Stack<T>::y = y}; }
  };
  Batch batch(std::span<const std::size_t> rows) const { return {kiln::test::take_rows(xs, rows), kiln::test::take_rows(ys, rows)}; }
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
  // explain() names what cuBLASLt offered for each product it runs.
  CHECK(gpu.explain().find("    cuBLASLt: ") != std::string::npos);
}

TEST_CASE("Trainer in ReduceOverhead on the GPU: a bf16 model on float master weights follows float64") {
  Data<kiln::bf16> data(40);
  Data<double> data64(40);
  data64.xs = data.xs.as<double>(), data64.ys = data.ys.as<double>();  // the same (bf16) samples
  const auto start = initial<float>();
  kiln::train::Parameters<double> start64;
  for (const auto& [name, t] : start) start64[name] = t.as<double>();
  auto args = arguments("gpu_bf16");
  args.bf16 = true;
  kiln::Trainer<Stack<kiln::bf16>, kiln::ReduceOverhead> gpu(args, start, kiln::Device::cuda());
  kiln::Trainer<Stack<double>> cpu(arguments("cpu_f64"), start64);
  static_assert(std::is_same_v<decltype(gpu)::Parameters, kiln::train::Parameters<float>>);
  gpu.train(data);
  cpu.train(data64);
  REQUIRE(gpu.log_history().size() == 25);
  for (std::size_t i = 0; i < 25; ++i) {
    CAPTURE(i);
    CHECK(gpu.log_history()[i].loss == doctest::Approx(cpu.log_history()[i].loss).epsilon(0.05));
  }
  // The weights' changes over the run: ||gpu - float64|| / ||float64||.
  double diff = 0, norm = 0;
  for (const auto& [name, t] : cpu.parameters()) {
    const auto a = gpu.parameters().at(name).cpu();
    const auto& w0 = start64.at(name);
    for (std::size_t i = 0; i < a.numel(); ++i) {
      const double d_gpu = static_cast<double>(a[i]) - w0[i], d_ref = t[i] - w0[i];
      diff += (d_gpu - d_ref) * (d_gpu - d_ref), norm += d_ref * d_ref;
    }
  }
  MESSAGE("relative error of the weights' change: " << std::sqrt(diff / norm));
  CHECK(norm > 0);
  CHECK(std::sqrt(diff / norm) < 0.05);
  CHECK(gpu.graph_captures() == 1);
  CHECK(gpu.graph_replays() == 23);
}

#if KILN_WITH_NCCL
TEST_CASE("Trainer over NCCL with one rank on the GPU: the same bits as without it, its sums inside the step's graph") {
  namespace dist = kiln::distributed;
  const dist::Environment one;  // rank 0 of 1: NCCL's whole path (init, in-graph sums, host sums) on one GPU
  auto nccl = std::make_shared<dist::NcclCommunicator>(one, "fingerprint", std::chrono::milliseconds(60000));
  REQUIRE(nccl->size() == 1);
  {  // a sum over one rank leaves every bit as it was, on the device and on the host
    std::mt19937_64 rng(5);
    std::normal_distribution<double> d;
    kiln::Tensor<float> x(Shape{1000});
    for (std::size_t i = 0; i < x.numel(); ++i) x[i] = static_cast<float>(d(rng));
    auto on_gpu = x.to(kiln::Device::cuda());
    nccl->all_reduce_sum(on_gpu.data(), on_gpu.numel(), kiln::Device::cuda());
    nccl->join();
    nccl->synchronize();
    const auto back = on_gpu.cpu();
    for (std::size_t i = 0; i < x.numel(); ++i) REQUIRE(back[i] == x[i]);
    double host[2] = {1.25, -3.5};
    nccl->all_reduce_host(host, 2);
    nccl->synchronize();
    CHECK(host[0] == 1.25);
    CHECK(host[1] == -3.5);
  }
  const Data<float> data(40);
  kiln::Trainer<Stack<float>, kiln::ReduceOverhead> alone(arguments("nccl_alone"), initial<float>(), kiln::Device::cuda(),
                                                          dist::Environment{});
  kiln::Trainer<Stack<float>, kiln::ReduceOverhead> ranked(arguments("nccl_ranked"), initial<float>(), kiln::Device::cuda(),
                                                           nccl);
  CHECK(ranked.world_size() == 1);
  CHECK_FALSE(ranked.gradient_buckets().empty());  // the gradients are summed, bucket by bucket
  alone.train(data);
  ranked.train(data);
  REQUIRE(ranked.log_history().size() == alone.log_history().size());
  for (std::size_t i = 0; i < alone.log_history().size(); ++i) {
    CAPTURE(i);
    CHECK(ranked.log_history()[i].loss == alone.log_history()[i].loss);
    CHECK(ranked.log_history()[i].grad_norm == alone.log_history()[i].grad_norm);
  }
  for (const auto& [name, t] : alone.parameters()) {
    CAPTURE(name);
    const auto a = t.cpu(), b = ranked.parameters().at(name).cpu();
    for (std::size_t i = 0; i < a.numel(); ++i) REQUIRE(a[i] == b[i]);
  }
  // The step with its NCCL sums (forked onto the communicator's stream and joined back) is
  // captured once and replayed, as without them.
  CHECK(ranked.graph_captures() == 1);
  CHECK(ranked.graph_replays() == 23);
}
#endif

TEST_SUITE_END();
