// kiln: GPT-2 with its language-modelling loss, as the stack of layers kiln::Trainer trains
// (train/stacked.hpp); its weights save as a Hugging Face checkpoint that kiln::models::GPT2
// (and transformers' GPT2LMHeadModel) loads:
//
//   using M = kiln::models::GPT2ForTraining<float, 4, 4>;        // 4 layers of 4 heads
//   kiln::models::GPT2Config config;  config.vocab_size = 96; config.n_embd = 128; ...
//   kiln::Trainer<M> trainer(args, M::init(config, 42));
//   trainer.train(data);                                       // batches bind M's inputs
//   M::save_pretrained("out", config, trainer.parameters());   // then GPT2<float>::from_pretrained("out")
//
// The loss, for token ids x [B, S] and the next token of each position, labels [B * S]:
//   logits = GPT-2(x) [B, S, V] (models/gpt2.hpp, causal attention over the S positions)
//   loss   = cross_entropy(logits as [B * S, V], labels)      (HF's loss, its labels shifted)
// The layer is models/gpt2.hpp's (GPT2Graph::block), compiled once for every layer.
#pragma once
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/expr/ops.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/models/gpt2.hpp"
#include "kiln/nn/losses.hpp"

namespace kiln::models {

template <class T, int Layers, int Heads>
struct GPT2ForTraining {
  static_assert(Layers >= 1 && Heads >= 1, "kiln::models::GPT2ForTraining: give at least one layer and one head");
  using element = T;
  using G = GPT2Graph<T>;
  static constexpr double eps = 1e-5;  // layer_norm_epsilon
  static constexpr auto input_ids = G::input_ids;        // [batch, seq]
  static constexpr auto position_ids = G::position_ids;  // [batch, seq]: 0..seq-1 in each row
  static constexpr auto labels = input<"labels", 1, i64>();  // [batch * seq]: the token after each position

  // The stack, as kiln::Trainer trains it region by region (train/stacked.hpp): the embedding,
  // one layer over the residual stream `residual` (its weights "h.<l>.*" for layer l), and the
  // head with the loss.
  static constexpr int layers = Layers;
  static constexpr auto residual = G::h;  // [batch, seq, n_embd]
  static auto embed() { return G::embed(); }
  static auto layer() {
    return G::block(Heads, eps, [](auto q, auto k, auto v) { return std::pair{attention<AttentionMask::Causal>(q, k, v), 0}; })
        .first;
  }
  // The logits [batch, seq, vocab] (kiln::Trainer::predict's value), and the loss.
  static auto head_predictions() { return matmul(layer_norm(G::h, G::lnf_w, G::lnf_b, eps), transpose(G::wte)); }
  static auto head_loss() { return nn::cross_entropy(flatten<0, 1>(head_predictions()), cast<T>(labels)); }
  static constexpr auto embed_parameters() { return std::tuple{G::wte, G::wpe}; }
  static constexpr auto layer_parameters() {
    return std::tuple{G::ln1_w, G::ln1_b, G::attn_w, G::attn_b, G::proj_w, G::proj_b,
                      G::ln2_w, G::ln2_b, G::fc_w,   G::fc_b,   G::mproj_w, G::mproj_b};
  }
  static constexpr auto head_parameters() { return std::tuple{G::lnf_w, G::lnf_b, G::wte}; }  // wte: the tied head
  static std::string layer_prefix(int l) { return "h." + std::to_string(l) + "."; }

  // Weights initialised as Hugging Face's GPT2PreTrainedModel._init_weights does: N(0, 0.02)
  // for the embeddings and projections, N(0, 0.02 / sqrt(2 n_layer)) for the two projections
  // into the residual stream (attn.c_proj, mlp.c_proj), zero biases, layer norms at 1 and 0.
  // A ValueError when the configuration does not have this model's layers and heads.
  static std::map<std::string, Tensor<T>> init(const GPT2Config& c, std::uint64_t seed) {
    check(c);
    std::mt19937_64 rng(seed);
    const auto E = static_cast<std::size_t>(c.n_embd), I = static_cast<std::size_t>(c.n_inner);
    const double residual = 0.02 / std::sqrt(2.0 * Layers);
    std::map<std::string, Tensor<T>> w;
    auto normal = [&](const std::string& name, Shape shape, double stddev) {
      std::normal_distribution<double> d(0.0, stddev);
      Tensor<T> t(shape);
      for (std::size_t i = 0; i < t.numel(); ++i) t[i] = detail::element_from<T>(d(rng));
      w[name] = std::move(t);
    };
    auto constant = [&](const std::string& name, std::size_t n, double v) {
      w[name] = from_vector(std::vector<T>(n, detail::element_from<T>(v)), Shape{n});
    };
    normal("wte", {static_cast<std::size_t>(c.vocab_size), E}, 0.02);
    normal("wpe", {static_cast<std::size_t>(c.n_positions), E}, 0.02);
    for (int l = 0; l < Layers; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      constant(p + "ln_1.weight", E, 1), constant(p + "ln_1.bias", E, 0);
      normal(p + "attn.c_attn.weight", {E, 3 * E}, 0.02), constant(p + "attn.c_attn.bias", 3 * E, 0);
      normal(p + "attn.c_proj.weight", {E, E}, residual), constant(p + "attn.c_proj.bias", E, 0);
      constant(p + "ln_2.weight", E, 1), constant(p + "ln_2.bias", E, 0);
      normal(p + "mlp.c_fc.weight", {E, I}, 0.02), constant(p + "mlp.c_fc.bias", I, 0);
      normal(p + "mlp.c_proj.weight", {I, E}, residual), constant(p + "mlp.c_proj.bias", E, 0);
    }
    constant("ln_f.weight", E, 1), constant("ln_f.bias", E, 0);
    return w;
  }

  // Writes dir/config.json and dir/model.safetensors (the weights by HF's names, on the host):
  // a checkpoint kiln::models::GPT2<T>::from_pretrained(dir) and GPT2LMHeadModel load.
  // A ValueError names a weight of the model that `weights` lacks.
  static void save_pretrained(const std::string& dir, const GPT2Config& c, const std::map<std::string, Tensor<T>>& weights) {
    check(c);
    std::filesystem::create_directories(dir);
    nlohmann::json config = {{"architectures", {"GPT2LMHeadModel"}},
                             {"model_type", "gpt2"},
                             {"vocab_size", c.vocab_size},
                             {"n_positions", c.n_positions},
                             {"n_embd", c.n_embd},
                             {"n_layer", c.n_layer},
                             {"n_head", c.n_head},
                             {"n_inner", c.n_inner},
                             {"activation_function", "gelu_new"},
                             {"layer_norm_epsilon", c.layer_norm_epsilon},
                             {"tie_word_embeddings", true}};
    if (c.eos_token_ids.size() == 1) config["eos_token_id"] = c.eos_token_ids[0];
    else if (!c.eos_token_ids.empty()) config["eos_token_id"] = c.eos_token_ids;
    if (c.pad_token_id >= 0) config["pad_token_id"] = c.pad_token_id;
    {
      std::ofstream out(dir + "/config.json");
      out << config.dump(2) << "\n";
      if (!out) throw FileError("kiln::models::GPT2ForTraining::save_pretrained: cannot write " + dir + "/config.json");
    }
    std::vector<io::NamedTensor> named;
    const auto add = [&](const std::string& name) {
      const auto it = weights.find(name);
      if (it == weights.end())
        throw ValueError("kiln::models::GPT2ForTraining::save_pretrained: the weights have no \"" + name + "\"");
      named.emplace_back(name, it->second);
    };
    add("wte"), add("wpe"), add("ln_f.weight"), add("ln_f.bias");
    named[0].name = "wte.weight", named[1].name = "wpe.weight";  // HF's names of the embeddings
    for (int l = 0; l < Layers; ++l)
      std::apply([&](auto... w) { (add(layer_prefix(l) + std::string(w.name())), ...); }, layer_parameters());
    io::save_safetensors(dir + "/model.safetensors", named, {{"format", "pt"}});
  }

 private:
  static void check(const GPT2Config& c) {
    if (c.n_layer != Layers || c.n_head != Heads || c.layer_norm_epsilon != eps)
      throw ValueError("kiln::models::GPT2ForTraining<" + std::to_string(Layers) + ", " + std::to_string(Heads) +
                       ">: the configuration has n_layer " + std::to_string(c.n_layer) + ", n_head " +
                       std::to_string(c.n_head) + " and layer_norm_epsilon " + std::to_string(c.layer_norm_epsilon) +
                       "; the model has " + std::to_string(Layers) + ", " + std::to_string(Heads) + " and 1e-5");
    if (c.n_embd % c.n_head != 0)
      throw ValueError("kiln::models::GPT2ForTraining: n_embd " + std::to_string(c.n_embd) + " is not a multiple of n_head " +
                       std::to_string(c.n_head));
  }
};

}  // namespace kiln::models
