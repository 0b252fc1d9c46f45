// kiln::Trainer on a stack of layers (train/stacked.hpp), compiled region by region: its updates
// equal those of the same model compiled as one program (float64, to rounding), a weight shared
// by the embedding and the head gets the sum of both gradients, and a run saved and resumed gives
// the bits of one that is not (the models of tests/stacked_models.hpp, in float64).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "stacked_models.hpp"

namespace {
namespace fs = std::filesystem;
using kiln::Shape;
using kiln::Tensor;

using Parts = kiln::test::Parts<double>;
using Stacked = kiln::test::Stacked<double>;
using OneProgram = kiln::test::OneProgram<double>;
using Data = kiln::test::Data<double>;
static_assert(kiln::train::StackedModel<Stacked>);
static_assert(!kiln::train::StackedModel<OneProgram>);
static_assert(kiln::numbered<"layer", 12>().view() == "layer12.");
static_assert(std::is_same_v<decltype(kiln::prefixed<"layer1.">(Parts::w)), decltype(kiln::param<"layer1.w", 2, double>())>);

kiln::train::Parameters<double> initial(std::uint64_t seed) { return kiln::test::stacked_weights<double>(seed); }

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

TEST_CASE("StackedStep: with a flat state, the update runs once over the whole buffers and agrees with one per parameter") {
  // Two engines on the same batch: one whose parameters, moments and gradients are FlatState's
  // views (what kiln::Trainer gives it), one with tensors of their own. Their updates agree to
  // rounding (the norm is summed in another order); the flat one ran over the whole buffers, and
  // a map entry rebound to other memory sends it back to the update by parameter.
  using Engine = kiln::train::StackedStep<Stacked>;
  using F = kiln::train::FlatState<double>;
  const Data data(10, 17);
  const std::vector<std::size_t> rows{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const auto batch = data.batch(rows);
  const auto start = initial(18);
  kiln::test::FlatViews<Engine, double> state(start);
  auto& flat = state.flat;
  auto &params_flat = state.params, &moments_flat = state.moments;
  kiln::train::Parameters<double> params_own, moments_own;
  for (const auto& [name, t] : start) {
    params_own.emplace(name, t);
    moments_own.emplace("exp_avg." + name, kiln::zeros<double>(start.at(name).shape()));
    moments_own.emplace("exp_avg_sq." + name, kiln::zeros<double>(start.at(name).shape()));
  }
  Engine with_flat, without;
  with_flat.use_flat(flat);
  kiln::train::Hyper<double> hyper;
  hyper.max_grad_norm_value = 0.5, hyper.weight_decay_value = 0.01;
  for (int step = 1; step <= 3; ++step) {
    hyper.set(0.05, step, 1.0);
    const auto [loss_flat, norm_flat] = with_flat.step(batch.bindings(), params_flat, moments_flat, hyper);
    hyper.set(0.05, step, 1.0);
    const auto [loss_own, norm_own] = without.step(batch.bindings(), params_own, moments_own, hyper);
    CHECK(loss_flat == doctest::Approx(loss_own).epsilon(1e-12));
    CHECK(norm_flat == doctest::Approx(norm_own).epsilon(1e-12));
  }
  CHECK(with_flat.whole_buffer_updates() == 3);
  CHECK(without.whole_buffer_updates() == 0);
  for (const auto& [name, t] : params_own)
    for (std::size_t i = 0; i < t.numel(); ++i) CHECK(params_flat.at(name)[i] == doctest::Approx(t[i]).epsilon(1e-12));
  for (const auto& [name, t] : moments_own)
    for (std::size_t i = 0; i < t.numel(); ++i) CHECK(moments_flat.at(name)[i] == doctest::Approx(t[i]).epsilon(1e-12));
  // The gaps between parts stay zero.
  const auto whole = flat->whole(F::kParam);
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < whole.numel(); ++i) zeros += whole[i] == 0.0;
  CHECK(zeros == whole.numel() - 12 - 8 - 2 * (16 + 4));
  // An entry rebound to memory of its own: the update goes parameter by parameter.
  params_flat.at("w_out") = Tensor<double>(params_flat.at("w_out"));
  hyper.set(0.05, 4, 1.0);
  with_flat.step(batch.bindings(), params_flat, moments_flat, hyper);
  CHECK(with_flat.whole_buffer_updates() == 3);
}
