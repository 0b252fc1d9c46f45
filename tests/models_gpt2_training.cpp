// GPT2ForTraining (kiln/models/gpt2_training.hpp) against transformers: the HF fixture's weights
// loaded into it give, as the Trainer evaluates it, the cross-entropy of HF's float64 logits;
// save_pretrained writes a checkpoint kiln::models::GPT2 loads to HF's logits; training lowers
// the loss; init follows HF's initialisation.
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "kiln/models/gpt2_training.hpp"
#include "kiln/train/trainer.hpp"
#include "model_cases.hpp"

namespace {
namespace fs = std::filesystem;
using M = kiln::models::GPT2ForTraining<double, 2, 4>;  // the fixture: 2 layers, 4 heads, n_embd 48, vocab 96
const std::string kTiny = model_cases::fixture("gpt2_tiny");

// The fixture's weights by GPT2ForTraining's names.
kiln::train::Parameters<double> fixture_weights() {
  const kiln::models::Checkpoint ckpt(kTiny);
  const std::string prefix = ckpt.contains("transformer.wte.weight") ? "transformer." : "";
  kiln::train::Parameters<double> w;
  w["wte"] = ckpt.get<double>(prefix + "wte.weight", kiln::Device::cpu());
  w["wpe"] = ckpt.get<double>(prefix + "wpe.weight", kiln::Device::cpu());
  for (const char* name : {"ln_f.weight", "ln_f.bias"}) w[name] = ckpt.get<double>(prefix + name, kiln::Device::cpu());
  for (int l = 0; l < 2; ++l)
    std::apply([&](auto... p) { ((w[M::layer_prefix(l) + std::string(p.name())] = ckpt.get<double>(prefix + M::layer_prefix(l) + std::string(p.name()), kiln::Device::cpu())), ...); },
               M::layer_parameters());
  return w;
}

// One batch: the reference's ids [2, 11], each position labelled with the token after it (the
// last with the first generated token).
struct Batch {
  kiln::Tensor<kiln::i64> ids, positions, labels;
  auto bindings() const { return std::tuple{M::input_ids = ids, M::position_ids = positions, M::labels = labels}; }
};
struct OneBatch {
  Batch b;
  std::size_t size() const { return 2; }
  Batch batch(std::span<const std::size_t> rows) const {
    REQUIRE(rows.size() == 2);
    REQUIRE(rows[0] == 0);
    return b;
  }
};
OneBatch batch_of(const model_cases::Reference& r) {
  const std::size_t B = 2, S = 11;
  OneBatch d{{r.ids, kiln::Tensor<kiln::i64>(kiln::Shape{B, S}), kiln::Tensor<kiln::i64>(kiln::Shape{B * S})}};
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t s = 0; s < S; ++s) {
      d.b.positions[b * S + s] = static_cast<long>(s);
      d.b.labels[b * S + s] = s + 1 < S ? r.ids[b * S + s + 1] : r.generated[b * 19 + S];
    }
  return d;
}

kiln::TrainingArguments arguments() {
  kiln::TrainingArguments a;
  a.per_device_train_batch_size = 2, a.per_device_eval_batch_size = 2, a.max_steps = 5, a.learning_rate = 1e-2;
  a.logging_steps = 0, a.save_steps = 0, a.print_logs = false, a.seed = 3;
  a.output_dir = (fs::temp_directory_path() / ("kiln_gpt2_training_" + std::to_string(::getpid()))).string();
  return a;
}
}  // namespace

TEST_CASE("GPT2ForTraining: HF's weights give the cross-entropy of HF's logits; saved, GPT2 loads them") {
  const auto r = model_cases::reference(kTiny, 96);
  const OneBatch data = batch_of(r);
  // The loss from transformers' float64 logits: -mean log_softmax(logits)[label].
  double want = 0;
  for (std::size_t i = 0; i < 22; ++i) {
    double top = -INFINITY, z = 0;
    for (std::size_t v = 0; v < 96; ++v) top = std::max(top, r.logits[i * 96 + v]);
    for (std::size_t v = 0; v < 96; ++v) z += std::exp(r.logits[i * 96 + v] - top);
    want -= r.logits[i * 96 + static_cast<std::size_t>(data.b.labels[i])] - top - std::log(z);
  }
  want /= 22;
  const auto config = kiln::models::GPT2Config::from(kiln::models::JsonConfig(kTiny + "/config.json"));
  const auto args = arguments();
  kiln::Trainer<M> trainer(args, fixture_weights());
  const double got = trainer.evaluate(data);
  CHECK(got == doctest::Approx(want).epsilon(1e-12));

  const std::string saved = args.output_dir + "/saved";
  M::save_pretrained(saved, config, trainer.parameters());
  CHECK(model_cases::error_of<kiln::models::GPT2<double>>(saved, r) < 1e-12);

  trainer.train(data);
  CHECK(trainer.evaluate(data) < 0.5 * got);  // 5 AdamW steps of lr 1e-2 on one batch fit it
  fs::remove_all(args.output_dir);
}

TEST_CASE("GPT2ForTraining: HF's initialisation, and a configuration of other depth is a ValueError") {
  kiln::models::GPT2Config c;
  c.vocab_size = 50, c.n_positions = 32, c.n_embd = 64, c.n_layer = 2, c.n_head = 4, c.n_inner = 256;
  const auto w = M::init(c, 1);
  const auto stddev = [](const kiln::Tensor<double>& t) {
    double s = 0;
    for (std::size_t i = 0; i < t.numel(); ++i) s += t[i] * t[i];
    return std::sqrt(s / static_cast<double>(t.numel()));
  };
  CHECK(stddev(w.at("wte")) == doctest::Approx(0.02).epsilon(0.05));
  CHECK(stddev(w.at("h.1.mlp.c_fc.weight")) == doctest::Approx(0.02).epsilon(0.05));
  CHECK(stddev(w.at("h.1.mlp.c_proj.weight")) == doctest::Approx(0.01).epsilon(0.05));  // 0.02 / sqrt(2 * 2)
  CHECK(w.at("h.0.ln_1.weight")[5] == 1.0);
  CHECK(w.at("h.0.attn.c_attn.bias")[5] == 0.0);
  CHECK(w.size() == 4 + 2 * 12);
  c.n_layer = 3;
  CHECK_THROWS_WITH_AS(M::init(c, 1), doctest::Contains("the configuration has n_layer 3"), kiln::ValueError);
}
