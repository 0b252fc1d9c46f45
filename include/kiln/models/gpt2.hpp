// kiln: GPT-2 (Hugging Face's GPT2LMHeadModel), loaded from a checkpoint directory and compiled
// with any policy, as torch.compile compiles the module:
//
//   auto lm = kiln::models::GPT2<float>::from_pretrained("gpt2", kiln::Device::cpu());
//   auto fast = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(lm);
//   kiln::Tensor<float> logits = fast(input_ids);   // i64 [batch, seq] -> [batch, seq, vocab]
//
// The logits are float for a 16-bit model (kiln::bf16, kiln::f16), else in the model's type.
//
// The model, for hidden size E, H heads of D = E / H, and positions 0..S-1:
//   h_0 = wte[ids] + wpe[positions]              (positions [batch, S]: models/generation.hpp)
//   per layer:  a = ln_1(h);  [q k v] = a W_attn + b_attn, each split into H heads
//               h = h + attention_causal(q, k, v) W_proj + b_proj          (scale 1 / sqrt(D);
//                                                   each sequence's keys within its window)
//               h = h + gelu_tanh(ln_2(h) W_fc + b_fc) W_mproj + b_mproj
//   logits = ln_f(h) wteᵀ                                                  (the tied head)
// Weights are HF's Conv1D layout, [in, out], so each projection is x W. Loading, regional
// compilation, the call and generate() are models/decoder.hpp's.
//
// Supported configurations: activation_function gelu_new, gelu_pytorch_tanh or gelu_fast (the
// tanh form); scale_attn_weights true; scale_attn_by_inverse_layer_idx and
// reorder_and_upcast_attn false. Anything else is a ValueError naming the key, rather than a
// model that silently computes something else.
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/expr/ops.hpp"
#include "kiln/models/decoder.hpp"
#include "kiln/models/gpt2_config.hpp"

namespace kiln::models {

// The symbols and expressions of GPT-2's compiled programs, in element type T.
template <class T>
struct GPT2Graph : CacheSymbols<T> {
  using Cache = CacheSymbols<T>;
  static constexpr auto input_ids = input<"input_ids", 2, i64>();
  static constexpr auto position_ids = input<"position_ids", 2, i64>();  // [batch, seq]
  static constexpr auto wte = param<"wte", 2, T>();
  static constexpr auto wpe = param<"wpe", 2, T>();
  static constexpr auto h = input<"h", 3, T>();  // the residual stream, [batch, seq, n_embd]
  static constexpr auto ln1_w = param<"ln_1.weight", 1, T>();
  static constexpr auto ln1_b = param<"ln_1.bias", 1, T>();
  static constexpr auto attn_w = param<"attn.c_attn.weight", 2, T>();
  static constexpr auto attn_b = param<"attn.c_attn.bias", 1, T>();
  static constexpr auto proj_w = param<"attn.c_proj.weight", 2, T>();
  static constexpr auto proj_b = param<"attn.c_proj.bias", 1, T>();
  static constexpr auto ln2_w = param<"ln_2.weight", 1, T>();
  static constexpr auto ln2_b = param<"ln_2.bias", 1, T>();
  static constexpr auto fc_w = param<"mlp.c_fc.weight", 2, T>();
  static constexpr auto fc_b = param<"mlp.c_fc.bias", 1, T>();
  static constexpr auto mproj_w = param<"mlp.c_proj.weight", 2, T>();
  static constexpr auto mproj_b = param<"mlp.c_proj.bias", 1, T>();
  static constexpr auto lnf_w = param<"ln_f.weight", 1, T>();
  static constexpr auto lnf_b = param<"ln_f.bias", 1, T>();

  static constexpr auto embed() { return embedding(input_ids, wte) + embedding(position_ids, wpe); }

  // One layer, its attention given as attend(q, k, v) -> {o, extra outputs}, the heads
  // [B, H, S, D]. [B, S, E] -> [B, S, H, D] -> [B, H, S, D] are views (no copy): the kernels
  // read them through their strides. Returns {h after the layer, the extra outputs}.
  template <class Attend>
  static auto block(long heads, double eps, Attend attend) {
    // Values read in several places are kiln::shared, computed once: kiln merges repeated
    // subexpressions only where they hold no run-time constants, and chunk's, unflatten's and
    // layer_norm's are. A derivative reads the values its rule needs again (a matmul's input,
    // a norm's), so for kiln::grad each layer's intermediate values are shared as well.
    const auto a = shared<"ln_1">(layer_norm(h, ln1_w, ln1_b, eps));
    const auto [q, k, v] = chunk<3, 2>(shared<"qkv">(matmul(a, attn_w) + attn_b));
    const auto split = [heads](auto x) { return transpose<1, 2>(unflatten<2>(x, {heads, -1})); };
    const auto [o, extra] = attend(split(q), split(k), split(v));
    const auto merged = shared<"attn">(flatten<2, 3>(transpose<1, 2>(o)));
    const auto h1 = shared<"h1">(h + matmul(merged, proj_w) + proj_b);
    const auto m = shared<"mlp">(gelu_tanh(matmul(shared<"ln_2">(layer_norm(h1, ln2_w, ln2_b, eps)), fc_w) + fc_b));
    return std::pair{h1 + matmul(m, mproj_w) + mproj_b, extra};
  }
  static auto layer(long heads, double eps) {
    return block(heads, eps, [](auto q, auto k, auto v) { return std::pair{Cache::windowed_attention(q, k, v), 0}; }).first;
  }
  // The layer with a static KV cache (models/decoder.hpp): one program serves the prompt and
  // every decode step.
  static auto cached_layer(long heads, double eps) {
    const auto [h_out, caches] = block(heads, eps, [](auto q, auto k, auto v) { return Cache::cached_attention(q, k, v); });
    return Cache::with_caches(h_out, caches);
  }

  // The logits: in T for float and double, in float for the 16-bit types.
  using Logits = std::conditional_t<(sizeof(T) < sizeof(float)), float, T>;
  static auto head(double eps) { return cast<Logits>(matmul(layer_norm(h, lnf_w, lnf_b, eps), transpose(wte))); }
};

// The weights of one layer, by HF's names after "h.<i>.".
template <class T>
struct GPT2Layer {
  Tensor<T> ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, mproj_w, mproj_b;
};

// GPT-2 as models/decoder.hpp's architecture.
template <class T>
struct GPT2Arch {
  using element = T;
  using Config = GPT2Config;
  using Graph = GPT2Graph<T>;
  using Logits = typename Graph::Logits;
  using Layer = GPT2Layer<T>;
  static constexpr const char* name = "GPT-2";
  struct Weights {
    GPT2Config config;
    Tensor<T> wte, wpe, lnf_w, lnf_b;
    std::vector<Layer> layers;
  };

  // HF's names, with or without the "transformer." prefix GPT2LMHeadModel saves.
  static Weights load(const std::string& dir, Device device) {
    Weights w;
    w.config = GPT2Config::from(JsonConfig(dir + "/config.json"));
    const GPT2Config& c = w.config;
    const Checkpoint ckpt(dir);
    const std::string prefix = ckpt.contains("transformer.wte.weight") ? "transformer." : "";
    const std::size_t E = static_cast<std::size_t>(c.n_embd), I = static_cast<std::size_t>(c.n_inner);
    auto get = [&](const std::string& name, Shape want) {
      Tensor<T> t = ckpt.get<T>(prefix + name, device);
      if (t.shape() != want)
        throw ShapeError("GPT-2 checkpoint " + dir + ": \"" + prefix + name + "\" has shape " + t.shape().str() +
                         ", the configuration gives " + want.str());
      return t;
    };
    w.wte = get("wte.weight", {static_cast<std::size_t>(c.vocab_size), E});
    w.wpe = get("wpe.weight", {static_cast<std::size_t>(c.n_positions), E});
    w.lnf_w = get("ln_f.weight", {E});
    w.lnf_b = get("ln_f.bias", {E});
    for (long i = 0; i < c.n_layer; ++i) {
      const std::string p = "h." + std::to_string(i) + ".";
      w.layers.push_back({get(p + "ln_1.weight", {E}), get(p + "ln_1.bias", {E}), get(p + "attn.c_attn.weight", {E, 3 * E}),
                           get(p + "attn.c_attn.bias", {3 * E}), get(p + "attn.c_proj.weight", {E, E}),
                           get(p + "attn.c_proj.bias", {E}), get(p + "ln_2.weight", {E}), get(p + "ln_2.bias", {E}),
                           get(p + "mlp.c_fc.weight", {E, I}), get(p + "mlp.c_fc.bias", {I}),
                           get(p + "mlp.c_proj.weight", {I, E}), get(p + "mlp.c_proj.bias", {E})});
    }
    return w;
  }

  static auto embed_program(const Config&) { return Graph::embed(); }
  static auto layer_program(const Config& c) { return Graph::layer(c.n_head, c.layer_norm_epsilon); }
  static auto cached_layer_program(const Config& c) { return Graph::cached_layer(c.n_head, c.layer_norm_epsilon); }
  static auto head_program(const Config& c) { return Graph::head(c.layer_norm_epsilon); }

  // What a call reads for positions [first, first + seq) of each sequence (numbered from its
  // first token after pads[b]): their ids [batch, seq], for the embedding.
  using Positions = Tensor<i64>;
  static Positions positions(const Weights&, std::size_t first, std::size_t seq, const std::vector<std::size_t>& pads,
                             Device device) {
    const std::vector<long> p = token_positions(first, seq, pads);
    return from_vector(std::vector<i64>(p.begin(), p.end()), Shape{pads.size(), seq}, device);
  }
  template <class F>
  static Tensor<T> embed(F& f, const Weights& w, const Tensor<i64>& ids, const Positions& pos) {
    return f(Graph::input_ids = ids, Graph::position_ids = pos, Graph::wte = w.wte, Graph::wpe = w.wpe);
  }
  template <class F, class... Extra>
  static auto layer(F& f, const Weights&, const Layer& l, const Tensor<T>& h, const Positions&, Extra... extra) {
    using G = Graph;
    return f(G::h = h, G::ln1_w = l.ln1_w, G::ln1_b = l.ln1_b, G::attn_w = l.attn_w, G::attn_b = l.attn_b,
             G::proj_w = l.proj_w, G::proj_b = l.proj_b, G::ln2_w = l.ln2_w, G::ln2_b = l.ln2_b, G::fc_w = l.fc_w,
             G::fc_b = l.fc_b, G::mproj_w = l.mproj_w, G::mproj_b = l.mproj_b, extra...);
  }
  template <class F>
  static auto head(F& f, const Weights& w, const Tensor<T>& h) {
    return f(Graph::h = h, Graph::lnf_w = w.lnf_w, Graph::lnf_b = w.lnf_b, Graph::wte = w.wte);
  }
};

// kiln::models::GPT2<T>::from_pretrained(dir, device), then kiln::compile<Policies...>(model).
template <class T>
using GPT2 = Model<GPT2Arch<T>>;

}  // namespace kiln::models
