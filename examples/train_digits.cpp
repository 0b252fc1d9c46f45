// kiln example: training a classifier on the UCI handwritten digits (1,797 8x8 images, 10
// classes). An MLP 64-128-10 with ReLU, cross-entropy and AdamW; the whole training step
// (forward, backward, AdamW update of every parameter and its state, in place) is one compiled
// program. A fixed seed and a fixed 80/20 train/test split make the run reproducible.
//
//   scripts/fetch_digits.sh                       # once: extracts data/digits.csv
//   ./build/examples/train_digits [data/digits.csv [learning rate]]
#include <kiln/kiln.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kPixels = 64, kHidden = 128, kClasses = 10, kBatch = 64;
constexpr int kEpochs = 30;
constexpr double kWeightDecay = 1e-4;
double learning_rate = 5e-3;  // the second argument, if given

// The model and its training step, as expressions.
constexpr auto x = kiln::input<"x", 2>();       // [batch, 64] pixels scaled to [0, 1]
constexpr auto y = kiln::input<"y", 1>();       // [batch] class labels 0-9
constexpr auto step_t = kiln::input<"t", 0>();  // the AdamW step count
constexpr auto w1 = kiln::param<"w1", 2>();
constexpr auto b1 = kiln::param<"b1", 1>();
constexpr auto w2 = kiln::param<"w2", 2>();
constexpr auto b2 = kiln::param<"b2", 1>();
constexpr auto logits = kiln::matmul(kiln::relu(kiln::matmul(x, w1) + b1), w2) + b2;
constexpr auto loss = kiln::nn::cross_entropy(logits, y);

// AdamW moments of each parameter.
constexpr auto m_w1 = kiln::param<"m_w1", 2>();
constexpr auto v_w1 = kiln::param<"v_w1", 2>();
constexpr auto m_b1 = kiln::param<"m_b1", 1>();
constexpr auto v_b1 = kiln::param<"v_b1", 1>();
constexpr auto m_w2 = kiln::param<"m_w2", 2>();
constexpr auto v_w2 = kiln::param<"v_w2", 2>();
constexpr auto m_b2 = kiln::param<"m_b2", 1>();
constexpr auto v_b2 = kiln::param<"v_b2", 1>();

// Outputs: the loss, then the in-place updates of every parameter and moment.
auto training_step(double lr) {
  const auto [g_w1, g_b1, g_w2, g_b2] = kiln::grad(loss, w1, b1, w2, b2);
  const auto adamw = [lr](auto w, auto m, auto v, auto g) {
    return kiln::nn::adamw(w, m, v, g, step_t, lr, 0.9, 0.999, 1e-8, kWeightDecay);
  };
  return std::apply([](const auto&... a) { return kiln::outputs(loss, a...); },
                    std::tuple_cat(adamw(w1, m_w1, v_w1, g_w1), adamw(b1, m_b1, v_b1, g_b1),
                                   adamw(w2, m_w2, v_w2, g_w2), adamw(b2, m_b2, v_b2, g_b2)));
}

struct Dataset {
  std::vector<float> pixels;  // n x 64, scaled to [0, 1]
  std::vector<int> labels;
  std::size_t size() const { return labels.size(); }
};

Dataset load(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr,
                 "train_digits: cannot open %s.\nRun scripts/fetch_digits.sh from the repository root first (it "
                 "extracts the UCI digits from Debian's python3-sklearn package into data/digits.csv), or give the "
                 "path of digits.csv as the first argument.\n",
                 path.c_str());
    std::exit(2);
  }
  Dataset d;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::stringstream ss(line);
    std::string cell;
    std::vector<float> row;
    while (std::getline(ss, cell, ',')) row.push_back(std::stof(cell));
    if (row.size() != kPixels + 1) {
      std::fprintf(stderr, "train_digits: %s: a row has %zu columns, expected 65 (64 pixels and a label)\n", path.c_str(), row.size());
      std::exit(2);
    }
    for (std::size_t p = 0; p < kPixels; ++p) d.pixels.push_back(row[p] / 16.0f);
    d.labels.push_back(static_cast<int>(row[kPixels]));
  }
  return d;
}

// Rows `idx` of the dataset as a batch: pixels and class labels.
void gather(const Dataset& d, const std::size_t* idx, std::size_t n, kiln::Tensor<float>& xb, kiln::Tensor<float>& yb) {
  for (std::size_t i = 0; i < n; ++i) {
    std::copy_n(&d.pixels[idx[i] * kPixels], kPixels, &xb[i * kPixels]);
    yb[i] = static_cast<float>(d.labels[idx[i]]);
  }
}

// Parameters and AdamW state, as tensors the step updates in place.
struct State {
  kiln::Tensor<float> w1{kPixels, kHidden}, b1{kHidden}, w2{kHidden, kClasses}, b2{kClasses};
  kiln::Tensor<float> m_w1{kPixels, kHidden}, v_w1{kPixels, kHidden}, m_b1{kHidden}, v_b1{kHidden};
  kiln::Tensor<float> m_w2{kHidden, kClasses}, v_w2{kHidden, kClasses}, m_b2{kClasses}, v_b2{kClasses};
  kiln::Tensor<float> t{kiln::Shape{}};

  explicit State(std::uint64_t seed) {
    // PyTorch's default Linear init scale: uniform in +-1/sqrt(fan_in); here normal with that std.
    w1 = kiln::randn<float>({kPixels, kHidden}, seed);
    w2 = kiln::randn<float>({kHidden, kClasses}, seed + 1);
    for (std::size_t i = 0; i < w1.numel(); ++i) w1[i] /= std::sqrt(float(kPixels));
    for (std::size_t i = 0; i < w2.numel(); ++i) w2[i] /= std::sqrt(float(kHidden));
    for (auto* z : {&b1, &b2, &m_w1, &v_w1, &m_b1, &v_b1, &m_w2, &v_w2, &m_b2, &v_b2}) z->fill(0.0f);
    t[0] = 0.0f;
  }
};

template <class Step>
float run_step(Step& step, State& s, const kiln::Tensor<float>& xb, const kiln::Tensor<float>& yb) {
  s.t[0] += 1.0f;
  auto [l] = step(x = xb, y = yb, step_t = s.t, w1 = s.w1, b1 = s.b1, w2 = s.w2, b2 = s.b2, m_w1 = s.m_w1, v_w1 = s.v_w1,
                  m_b1 = s.m_b1, v_b1 = s.v_b1, m_w2 = s.m_w2, v_w2 = s.v_w2, m_b2 = s.m_b2, v_b2 = s.v_b2);
  return l[0];
}

// Median wall time of `runs` calls, in microseconds.
template <class F>
double median_us(F&& f, int runs) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Dataset data = load(argc > 1 ? argv[1] : "data/digits.csv");
  if (argc > 2) learning_rate = std::atof(argv[2]);

  // A fixed split: 80% train, 20% test, after a seeded shuffle.
  std::vector<std::size_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(2026);
  std::shuffle(order.begin(), order.end(), rng);
  const std::size_t ntest = data.size() / 5;
  const std::vector<std::size_t> test(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(ntest));
  std::vector<std::size_t> train(order.begin() + static_cast<std::ptrdiff_t>(ntest), order.end());
  std::printf("digits: %zu samples, %zu train, %zu test; MLP %zu-%zu-%zu, AdamW lr %g, batch %zu\n", data.size(),
              train.size(), test.size(), kPixels, kHidden, kClasses, learning_rate, kBatch);

  auto step = kiln::compile<kiln::ReduceOverhead>(training_step(learning_rate));
  auto predict = kiln::compile(logits);
  std::printf("%s", step.explain().c_str());

  kiln::Tensor<float> xb({kBatch, kPixels}), yb({kBatch});
  kiln::Tensor<float> xtest({ntest, kPixels}), ytest({ntest});
  gather(data, test.data(), ntest, xtest, ytest);

  State s(7);
  const auto accuracy = [&] {
    const auto out = predict(x = xtest, w1 = s.w1, b1 = s.b1, w2 = s.w2, b2 = s.b2);
    std::size_t correct = 0;
    for (std::size_t i = 0; i < ntest; ++i) {
      const float* row = &out[i * kClasses];
      correct += static_cast<int>(std::max_element(row, row + kClasses) - row) == data.labels[test[i]];
    }
    return double(correct) / double(ntest);
  };

  double acc = 0;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    std::shuffle(train.begin(), train.end(), rng);
    double loss_sum = 0;
    std::size_t batches = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t at = 0; at + kBatch <= train.size(); at += kBatch, ++batches) {  // the last partial batch is dropped
      gather(data, &train[at], kBatch, xb, yb);
      loss_sum += run_step(step, s, xb, yb);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    acc = accuracy();
    std::printf("epoch %2d  loss %.4f  test accuracy %5.1f%%  %8.0f samples/s\n", epoch, loss_sum / double(batches), 100 * acc,
                double(batches * kBatch) / secs);
  }

  // Eager vs compiled: the same step, on copies of the trained state, on one batch.
  auto eager_step = kiln::eager(training_step(learning_rate));
  State se = s, sc = s;
  gather(data, train.data(), kBatch, xb, yb);
  const double te = median_us([&] { run_step(eager_step, se, xb, yb); }, 201);
  const double tc = median_us([&] { run_step(step, sc, xb, yb); }, 201);
  std::printf("training step, batch %zu: eager %.1f us, compiled (ReduceOverhead) %.1f us: %.2fx\n", kBatch, te, tc, te / tc);

  if (acc < 0.95) {
    std::printf("test accuracy %.1f%% is below 95%%\n", 100 * acc);
    return 1;
  }
  std::printf("final test accuracy %.1f%%\n", 100 * acc);
  return 0;
}
