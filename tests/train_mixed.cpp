// kiln::Trainer with bf16 mixed precision: a model that computes in kiln::bf16 is trained on
// float master weights and float AdamW moments. Its updates follow those of the same model in
// float64 (to the precision of bf16's forward and backward), updates smaller than half a bf16
// step accumulate in the master instead of rounding away, and a run saved and resumed gives the
// bits of one that is not.
// Both engines: a stack of layers (train/stacked.hpp) and one program (train/step.hpp).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <type_traits>

#include "stacked_models.hpp"

namespace {
namespace fs = std::filesystem;
using kiln::bf16;
using kiln::Shape;
using kiln::Tensor;

using kiln::test::Data;
using kiln::test::OneProgram;
using kiln::test::Stacked;

// Random weights, exactly representable in bf16 (so both runs start from the same values).
template <class U>
kiln::train::Parameters<U> initial(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, 0.5);
  const auto random = [&](Shape s) {
    Tensor<U> t(s);
    for (std::size_t i = 0; i < t.numel(); ++i) t[i] = static_cast<U>(static_cast<float>(bf16(static_cast<float>(d(rng)))));
    return t;
  };
  return {{"w_in", random({3, 4})},  {"w_out", random({4, 2})},    {"layer0.w", random({4, 4})},
          {"layer0.b", random({4})}, {"layer1.w", random({4, 4})}, {"layer1.b", random({4})}};
}

kiln::TrainingArguments arguments(const std::string& name, bool bf16) {
  kiln::TrainingArguments a;
  a.max_steps = 40, a.per_device_train_batch_size = 8, a.learning_rate = 5e-4, a.lr_scheduler_type = "constant";
  a.weight_decay = 0.01, a.max_grad_norm = 1.0, a.logging_steps = 1, a.save_steps = 0, a.print_logs = false;
  a.bf16 = bf16;
  a.output_dir = (fs::temp_directory_path() / ("kiln_mixed_" + name + "_" + std::to_string(::getpid()))).string();
  fs::remove_all(a.output_dir);
  return a;
}

// A bf16 run of Model<bf16> against the float64 run of Model<double> from the same weights.
template <template <class> class Model>
void follows_float64(const std::string& name) {
  using Mixed = kiln::Trainer<Model<bf16>>;
  static_assert(std::is_same_v<typename Mixed::Parameters, kiln::train::Parameters<float>>,
                "a bf16 model's trainer holds float master weights");
  const auto start = initial<double>(21);
  kiln::Trainer<Model<double>> reference(arguments(name + "_f64", false), start);
  kiln::train::Parameters<float> start_float;
  for (const auto& [n, t] : start) start_float[n] = t.template as<float>();
  Mixed mixed(arguments(name + "_bf16", true), start_float);
  reference.train(Data<double>(48, 22));
  mixed.train(Data<bf16>(48, 22));

  // The weights' changes over the run: ||mixed - float64|| / ||float64|| over all elements.
  double diff = 0, norm = 0;
  // The same over the weights whose every update was below half a bf16 step (|w| 2^-9 against an
  // AdamW step of at most about 2 lr): rounded to bf16 at each step they would not move at all
  // (a relative error of 1).
  double diff_small = 0, norm_small = 0;
  std::size_t small = 0;
  for (const auto& [n, t] : reference.parameters()) {
    const Tensor<double> w0 = start.at(n), w_ref = t.cpu();
    const Tensor<float> w_mixed = mixed.parameters().at(n).cpu();
    for (std::size_t i = 0; i < w0.numel(); ++i) {
      const double d_ref = w_ref[i] - w0[i], d_mixed = static_cast<double>(w_mixed[i]) - w0[i];
      diff += (d_mixed - d_ref) * (d_mixed - d_ref), norm += d_ref * d_ref;
      const double half_step = std::ldexp(1.0, std::ilogb(w0[i]) - 8);  // half the spacing of bf16 at w0
      if (2 * reference.args().learning_rate < half_step) {
        ++small;
        diff_small += (d_mixed - d_ref) * (d_mixed - d_ref), norm_small += d_ref * d_ref;
      }
    }
  }
  MESSAGE(name << ": relative error of the weights' change " << std::sqrt(diff / norm) << "; of the " << small
               << " weights whose updates were each below half a bf16 step " << std::sqrt(diff_small / norm_small));
  CHECK(norm > 0);
  CHECK(std::sqrt(diff / norm) < 0.01);
  REQUIRE(small >= 5);
  CHECK(std::sqrt(diff_small / norm_small) < 0.01);
  // The losses follow float64's to bf16's precision.
  REQUIRE(mixed.log_history().size() == reference.log_history().size());
  for (std::size_t i = 0; i < reference.log_history().size(); ++i)
    CHECK(mixed.log_history()[i].loss == doctest::Approx(reference.log_history()[i].loss).epsilon(0.03));
  for (const auto* a : {&reference.args(), &mixed.args()}) fs::remove_all(a->output_dir);
}

}  // namespace

TEST_CASE("Trainer, bf16 mixed precision: a stack of layers follows its float64 run on float master weights") {
  follows_float64<Stacked>("stacked");
}

TEST_CASE("Trainer, bf16 mixed precision: a one-program model follows its float64 run on float master weights") {
  follows_float64<OneProgram>("one_program");
}

TEST_CASE("Trainer, bf16 mixed precision: a run saved and resumed gives the bits of one that is not") {
  const Data<bf16> data(17, 6);
  auto args = arguments("whole", true);
  args.max_steps = 8, args.save_steps = 3, args.per_device_train_batch_size = 5, args.learning_rate = 0.05;
  kiln::train::Parameters<float> start, other;
  for (const auto& [n, t] : initial<double>(10)) start[n] = t.as<float>();
  for (const auto& [n, t] : initial<double>(11)) other[n] = t.as<float>();
  kiln::Trainer<Stacked<bf16>> whole(args, start);
  whole.train(data);
  auto again = arguments("resumed", true);
  again.max_steps = 8, again.per_device_train_batch_size = 5, again.learning_rate = 0.05;
  kiln::Trainer<Stacked<bf16>> resumed(again, other);
  resumed.train(data, kiln::train::NoData{}, args.output_dir + "/checkpoint-3");
  for (const auto& [name, t] : whole.parameters()) {
    const auto a = resumed.parameters().at(name).cpu(), b = t.cpu();
    CHECK(std::memcmp(a.data(), b.data(), a.numel() * sizeof(float)) == 0);
  }
  REQUIRE(resumed.log_history().size() == whole.log_history().size());
  CHECK(resumed.log_history().back().loss == whole.log_history().back().loss);
  // The checkpoint holds the float masters and moments.
  const kiln::io::SafetensorsFile model(args.output_dir + "/checkpoint-3/model.safetensors");
  CHECK(model.get<float>("layer1.w").shape() == Shape{4, 4});
  for (const auto& d : {args.output_dir, again.output_dir}) fs::remove_all(d);
}

TEST_CASE("Trainer: bf16 must agree with the model's element type") {
  kiln::train::Parameters<float> weights;
  for (const auto& [n, t] : initial<double>(3)) weights[n] = t.as<float>();
  CHECK_THROWS_WITH_AS(kiln::Trainer<Stacked<bf16>>(arguments("flag_off", false), weights),
                       doctest::Contains("bf16 is false but the model computes in bf16"), kiln::ValueError);
  CHECK_THROWS_WITH_AS(kiln::Trainer<Stacked<double>>(arguments("flag_on", true), initial<double>(3)),
                       doctest::Contains("bf16 is true but the model computes in f64"), kiln::ValueError);
}
