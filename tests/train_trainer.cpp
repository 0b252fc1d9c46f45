// kiln::Trainer: one update against AdamW with clipping computed by hand in float64, HF's
// learning-rate schedules, a run that stops, saves and resumes giving the same bits as one that
// does not, checkpoints written atomically and rotated, evaluation, profiling, and the errors.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "on_device.hpp"
#include "stacked_models.hpp"

namespace {
namespace fs = std::filesystem;

// Linear regression, loss = mean((x w + b - y)^2) over a batch of x [n, 3], y [n, 2].
template <class T>
struct Linear {
  using element = T;
  static constexpr auto x = kiln::input<"x", 2, T>();
  static constexpr auto y = kiln::input<"y", 2, T>();
  static constexpr auto w = kiln::param<"w", 2, T>();
  static constexpr auto b = kiln::param<"b", 1, T>();
  static constexpr auto parameters() { return std::tuple{w, b}; }
  static constexpr auto predictions() { return kiln::matmul(x, w) + b; }
  static constexpr auto loss() { return kiln::mean(kiln::square(predictions() - y)); }
};

// n samples of x [3] and y = x A + c + noise, in T.
template <class T>
struct Regression {
  kiln::Tensor<T> xs, ys;
  explicit Regression(std::size_t n, std::uint64_t seed)
      : xs(cases::randn<double>({n, 3}, seed).as<T>()), ys(kiln::Tensor<T>(kiln::Shape{n, 2})) {
    const double A[3][2] = {{1.0, -2.0}, {0.5, 0.25}, {-1.5, 3.0}}, c[2] = {0.3, -0.7};
    const auto noise = cases::randn<double>({n, 2}, seed + 1);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < 2; ++j) {
        double v = c[j] + 0.1 * noise[i * 2 + j];
        for (std::size_t k = 0; k < 3; ++k) v += static_cast<double>(xs[i * 3 + k]) * A[k][j];
        ys[i * 2 + j] = static_cast<T>(v);
      }
  }
  std::size_t size() const { return xs.shape()[0]; }
  struct Batch {
    kiln::Tensor<T> x, y;
    auto bindings() const { return std::tuple{Linear<T>::x = x, Linear<T>::y = y}; }
  };
  Batch batch(std::span<const std::size_t> rows) const { return {kiln::test::take_rows(xs, rows), kiln::test::take_rows(ys, rows)}; }
};

template <class T>
kiln::train::Parameters<T> initial(std::uint64_t seed) {
  return {{"w", cases::randn<double>({3, 2}, seed).as<T>()}, {"b", cases::randn<double>({2}, seed + 1).as<T>()}};
}

std::string scratch_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("kiln_trainer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

bool same_bits(const kiln::Tensor<double>& a, const kiln::Tensor<double>& b) {
  const auto x = a.cpu(), y = b.cpu();
  return x.shape() == y.shape() && std::memcmp(x.data(), y.data(), x.numel() * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("Trainer: one update is AdamW of the clipped gradient, in float64") {
  using M = Linear<double>;
  const Regression<double> data(4, 10);
  kiln::TrainingArguments args;
  args.max_steps = 1, args.per_device_train_batch_size = 4, args.learning_rate = 0.1, args.weight_decay = 0.01;
  args.max_grad_norm = 0.5, args.logging_steps = 1, args.save_steps = 0, args.print_logs = false;
  args.lr_scheduler_type = "constant", args.report_to = "none";
  const auto w0 = initial<double>(20);
  kiln::Trainer<M> trainer(args, w0);
  trainer.train(data);
  // By hand: r = x w + b - y over the 4 samples (in the epoch's order, which a mean ignores);
  // dL/dw = 2/8 x^T r, dL/db = 2/8 sum_i r_i; norm over both; c = min(0.5 / (norm + 1e-6), 1);
  // AdamW at t = 1: m = 0.1 g, v = 0.001 g^2, w <- w (1 - lr wd) - lr m/0.1 / (sqrt(v/0.001) + eps).
  const auto& W = w0.at("w");
  const auto& Bv = w0.at("b");
  double gw[3][2] = {}, gb[2] = {}, loss = 0;
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      double r = Bv[j] - data.ys[i * 2 + j];
      for (std::size_t k = 0; k < 3; ++k) r += data.xs[i * 3 + k] * W[k * 2 + j];
      loss += r * r / 8;
      for (std::size_t k = 0; k < 3; ++k) gw[k][j] += 2.0 / 8 * data.xs[i * 3 + k] * r;
      gb[j] += 2.0 / 8 * r;
    }
  double norm2 = 0;
  for (auto& row : gw)
    for (double g : row) norm2 += g * g;
  for (double g : gb) norm2 += g * g;
  const double norm = std::sqrt(norm2), c = std::min(0.5 / (norm + 1e-6), 1.0);
  REQUIRE(c < 1);  // the bound clips
  const auto adamw = [&](double w, double g) {
    g *= c;
    const double m = 0.1 * g, v = 0.001 * g * g;
    return w * (1 - 0.1 * 0.01) - 0.1 * (m / 0.1) / (std::sqrt(v / 0.001) + 1e-8);
  };
  const auto wt = trainer.parameters().at("w").cpu(), bt = trainer.parameters().at("b").cpu();
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t j = 0; j < 2; ++j) CHECK(wt[k * 2 + j] == doctest::Approx(adamw(W[k * 2 + j], gw[k][j])).epsilon(1e-12));
  for (std::size_t j = 0; j < 2; ++j) CHECK(bt[j] == doctest::Approx(adamw(Bv[j], gb[j])).epsilon(1e-12));
  REQUIRE(trainer.log_history().size() == 1);
  const auto& rec = trainer.log_history()[0];
  CHECK(rec.step == 1);
  CHECK(rec.loss == doctest::Approx(loss).epsilon(1e-12));
  CHECK(rec.grad_norm == doctest::Approx(norm).epsilon(1e-12));
  CHECK(rec.learning_rate == 0.1);
}

TEST_CASE("Trainer: HF's learning-rate schedules") {
  kiln::TrainingArguments a;
  a.learning_rate = 1.0, a.warmup_steps = 2;
  a.lr_scheduler_type = "linear";  // warmup to step 2, then down to 0 at step 10
  CHECK(kiln::learning_rate_at(a, 0, 10) == 0.0);
  CHECK(kiln::learning_rate_at(a, 1, 10) == 0.5);
  CHECK(kiln::learning_rate_at(a, 2, 10) == 1.0);
  CHECK(kiln::learning_rate_at(a, 6, 10) == 0.5);
  CHECK(kiln::learning_rate_at(a, 10, 10) == 0.0);
  a.lr_scheduler_type = "cosine";
  CHECK(kiln::learning_rate_at(a, 1, 10) == 0.5);
  CHECK(kiln::learning_rate_at(a, 6, 10) == doctest::Approx(0.5).epsilon(1e-15));
  CHECK(kiln::learning_rate_at(a, 10, 10) == doctest::Approx(0.0));
  a.lr_scheduler_type = "constant";  // ignores the warmup, as HF's
  CHECK(kiln::learning_rate_at(a, 0, 10) == 1.0);
  a.lr_scheduler_type = "constant_with_warmup";
  CHECK(kiln::learning_rate_at(a, 1, 10) == 0.5);
  CHECK(kiln::learning_rate_at(a, 7, 10) == 1.0);
}

TEST_CASE("Trainer: a run saved and resumed gives the bits of one that is not") {
  using M = Linear<double>;
  const Regression<double> data(10, 30);  // batches of 3: 4 per epoch, the last of 1 sample
  kiln::TrainingArguments args;
  args.max_steps = 10, args.per_device_train_batch_size = 3, args.learning_rate = 0.05, args.warmup_steps = 3;
  args.weight_decay = 0.01, args.logging_steps = 2, args.save_steps = 5, args.print_logs = false, args.seed = 7;
  args.output_dir = scratch_dir("whole");
  kiln::Trainer<M, kiln::ReduceOverhead> whole(args, initial<double>(40));
  const auto out = whole.train(data);
  CHECK(out.global_step == 10);
  // Stopped after step 5 (mid-epoch: epoch 1, batch 1) and resumed by a new trainer whose
  // initial weights the checkpoint replaces.
  const std::string checkpoint = args.output_dir + "/checkpoint-5";
  REQUIRE(fs::exists(checkpoint + "/model.safetensors"));
  REQUIRE(fs::exists(checkpoint + "/optimizer.safetensors"));
  REQUIRE(fs::exists(checkpoint + "/trainer_state.json"));
  kiln::TrainingArguments again = args;
  again.output_dir = scratch_dir("resumed");
  kiln::Trainer<M, kiln::ReduceOverhead> resumed(again, initial<double>(99));
  resumed.train(data, kiln::train::NoData{}, checkpoint);
  CHECK(resumed.global_step() == 10);
  for (const char* name : {"w", "b"}) CHECK(same_bits(resumed.parameters().at(name), whole.parameters().at(name)));
  REQUIRE(resumed.log_history().size() == whole.log_history().size());
  for (std::size_t i = 0; i < whole.log_history().size(); ++i) {
    CHECK(resumed.log_history()[i].step == whole.log_history()[i].step);
    CHECK(resumed.log_history()[i].loss == whole.log_history()[i].loss);
  }
  // The same run without compilation (kiln::Eager) follows the compiled one to rounding.
  kiln::TrainingArguments eager_args = args;
  eager_args.output_dir = scratch_dir("eager"), eager_args.save_steps = 0;
  kiln::Trainer<M, kiln::Eager> eager(eager_args, initial<double>(40));
  eager.train(data);
  const auto a = eager.parameters().at("w").cpu(), b = whole.parameters().at("w").cpu();
  for (std::size_t i = 0; i < a.numel(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-12));
  for (const auto& d : {args.output_dir, again.output_dir, eager_args.output_dir}) fs::remove_all(d);
}

TEST_CASE("Trainer: checkpoints are renamed into place and rotated; training fits the data") {
  using M = Linear<float>;
  const Regression<float> data(64, 50), held_out(32, 60);
  kiln::TrainingArguments args;
  args.num_train_epochs = 50, args.per_device_train_batch_size = 16, args.learning_rate = 0.1;
  args.lr_scheduler_type = "cosine", args.save_steps = 50, args.save_total_limit = 2, args.logging_steps = 0;
  args.eval_steps = 100, args.print_logs = false, args.output_dir = scratch_dir("rotate");
  fs::create_directories(args.output_dir + "/checkpoint-3.tmp");  // a save that was killed: never read
  kiln::Trainer<M> trainer(args, initial<float>(70));
  const double before = trainer.evaluate(held_out);
  const auto out = trainer.train(data, held_out);
  CHECK(out.global_step == 200);  // 50 epochs of 4 batches
  const double after = trainer.evaluate(held_out);
  // The noise's variance is 0.01 per output, the floor a fitted model nears. Measured: 10.1
  // before training, 0.0122 after.
  CHECK(after < 0.02);
  CHECK(after < before / 10);
  std::vector<std::string> kept;
  for (const auto& e : fs::directory_iterator(args.output_dir)) kept.push_back(e.path().filename().string());
  std::sort(kept.begin(), kept.end());
  CHECK(kept == std::vector<std::string>{"checkpoint-150", "checkpoint-200", "checkpoint-3.tmp", "trainer_log.jsonl"});
  // Evaluations: before training (step 0), every 100 steps, after training (step 200 again).
  std::vector<long> evals;
  for (const auto& r : trainer.log_history())
    if (!std::isnan(r.eval_loss)) evals.push_back(r.step);
  CHECK(evals == std::vector<long>{0, 100, 200, 200});
  CHECK(trainer.log_history().back().eval_loss == after);
  // trainer_log.jsonl: every record of the history as a JSON line, and the run's summary after
  // the last training step's.
  std::ifstream log(args.output_dir + "/trainer_log.jsonl");
  std::vector<nlohmann::json> records, summaries;
  for (std::string line; std::getline(log, line);) {
    const auto j = nlohmann::json::parse(line);
    (j.contains("train_runtime") ? summaries : records).push_back(j);
  }
  REQUIRE(records.size() == trainer.log_history().size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    CHECK(records[i].at("step").get<long>() == trainer.log_history()[i].step);
    CHECK(records[i].at("eval_loss").get<double>() == trainer.log_history()[i].eval_loss);
  }
  REQUIRE(summaries.size() == 1);
  CHECK(summaries[0].at("global_step").get<long>() == 200);
  CHECK(summaries[0].at("train_steps_per_second").get<double>() > 0);
  CHECK(summaries[0].at("train_loss").get<double>() == doctest::Approx(out.training_loss));
  CHECK(out.train_samples_per_second == doctest::Approx(16 * out.train_steps_per_second).epsilon(1e-9));
  fs::remove_all(args.output_dir);
}

TEST_CASE("Trainer: profile() times each kernel of the step") {
  using M = Linear<double>;
  const Regression<double> data(32, 80);
  kiln::TrainingArguments args;
  args.max_steps = 3, args.per_device_train_batch_size = 16, args.logging_steps = 0, args.print_logs = false;
  args.report_to = "none";
  kiln::Trainer<M> trainer(args, initial<double>(90));
  CHECK(trainer.explain().find("ms per call") == std::string::npos);
  trainer.profile();
  trainer.train(data);
  CHECK(trainer.explain().find("ms per call") != std::string::npos);
}

TEST_CASE("Trainer: bad arguments, weights and checkpoints are errors that name them") {
  using M = Linear<float>;
  kiln::TrainingArguments args;
  args.print_logs = false;
  auto w = initial<float>(80);
  w.erase("b");
  CHECK_THROWS_WITH_AS(kiln::Trainer<M>(args, w), doctest::Contains("the weights have no tensor named \"b\""), kiln::ValueError);
  w["b"] = kiln::zeros<float>({2, 1});
  CHECK_THROWS_WITH_AS(kiln::Trainer<M>(args, w), doctest::Contains("\"b\" has shape [2, 1]"), kiln::ShapeError);
  args.lr_scheduler_type = "exponential";
  CHECK_THROWS_WITH_AS(kiln::Trainer<M>(args, initial<float>(80)), doctest::Contains("lr_scheduler_type \"exponential\""),
                       kiln::ValueError);
  args.lr_scheduler_type = "linear";
  args.gradient_accumulation_steps = 0;
  CHECK_THROWS_WITH_AS(kiln::Trainer<M>(args, initial<float>(80)), doctest::Contains("gradient_accumulation_steps is 0"),
                       kiln::ValueError);
  args.gradient_accumulation_steps = 1;
  args.report_to = "tensorboard";
  CHECK_THROWS_WITH_AS(kiln::Trainer<M>(args, initial<float>(80)), doctest::Contains("report_to \"tensorboard\""),
                       kiln::ValueError);
  args.report_to = "none";
  kiln::Trainer<M> trainer(args, initial<float>(80));
  const Regression<float> data(8, 90);
  CHECK_THROWS_WITH_AS(trainer.train(data, kiln::train::NoData{}, scratch_dir("missing")), doctest::Contains("model.safetensors"),
                       kiln::FileError);
  args.per_device_train_batch_size = 16, args.dataloader_drop_last = true;
  kiln::Trainer<M> too_big(args, initial<float>(80));
  CHECK_THROWS_WITH_AS(too_big.train(data), doctest::Contains("the training data has 8 samples, no batch of 16"), kiln::ValueError);
}

TEST_CASE("Trainer: predict() gives the model's predictions of every sample in order, and the loss") {
  using M = Linear<double>;
  const Regression<double> data(11, 100);  // batches of 4: 4, 4 and 3 samples
  kiln::TrainingArguments args;
  args.per_device_eval_batch_size = 4, args.print_logs = false, args.report_to = "none";
  const auto w0 = initial<double>(110);
  kiln::Trainer<M> trainer(args, w0);
  const auto out = trainer.predict(data);
  REQUIRE(out.predictions.shape() == kiln::Shape{11, 2});
  const auto& W = w0.at("w");
  const auto& Bv = w0.at("b");
  for (std::size_t i = 0; i < 11; ++i)
    for (std::size_t j = 0; j < 2; ++j) {
      double v = Bv[j];
      for (std::size_t k = 0; k < 3; ++k) v += data.xs[i * 3 + k] * W[k * 2 + j];
      CHECK(out.predictions[i * 2 + j] == doctest::Approx(v).epsilon(1e-12));
    }
  CHECK(out.loss == doctest::Approx(trainer.evaluate(data)).epsilon(1e-12));
  CHECK(trainer.log_history().size() == 1);  // evaluate() logs; predict() does not
}
