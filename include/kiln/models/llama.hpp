// kiln: Llama and Gemma (Hugging Face's LlamaForCausalLM and GemmaForCausalLM), loaded from a
// checkpoint directory and compiled with any policy (models/decoder.hpp):
//
//   auto lm = kiln::models::Gemma<kiln::bf16>::from_pretrained("gemma-2b", kiln::Device::cuda());
//   auto fast = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(lm);
//   kiln::Tensor<float> logits = fast(input_ids);       // i64 [batch, seq] -> [batch, seq, vocab]
//   kiln::Tensor<kiln::i64> out = fast.generate(input_ids, {.max_new_tokens = 64});
//
// The model, for hidden size E, H query heads and Hkv key/value heads of head_dim D (grouped-
// query attention: query head h reads key/value head h / (H / Hkv)), at positions p:
//   h_0 = embed[ids]                                   (Gemma: times sqrt(E))
//   per layer:  a = norm(h, input_layernorm)
//               q = rope(a Wqᵀ), k = rope(a Wkᵀ), v = a Wvᵀ, split into heads (views)
//               h = h + attention_causal(q, k, v) Woᵀ                        (scale 1 / sqrt(D))
//               m = norm(h, post_attention_layernorm)
//               h = h + (act(m Wgateᵀ) * m Wupᵀ) Wdownᵀ    (act: silu; Gemma: the tanh GELU)
//   logits = norm(h, norm) Wheadᵀ            (Whead = embed when the embeddings are tied)
// norm(x, w) = x / sqrt(mean(x²) + eps) * w, Gemma's * (1 + w). rope is the half-rotation of
// HF's apply_rotary_pos_emb with theta = rope_theta; its tables are computed in double for the
// positions of each call (HF computes them in float). Weights are nn.Linear's [out, in]: the
// GEMMs read them transposed, in place.
//
// Supported configurations: hidden_act silu (Llama) or gelu_pytorch_tanh / gelu (Gemma's tanh
// GELU); no rope_scaling; no attention or MLP biases. Anything else is a ValueError naming the
// key.
#pragma once
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/expr/ops.hpp"
#include "kiln/models/config.hpp"
#include "kiln/models/decoder.hpp"

namespace kiln::models {

// The two families: Llama (and the models that share its layout) and Gemma.
struct LlamaFamily {
  static constexpr const char* name = "Llama";
  static constexpr bool gemma = false;
};
struct GemmaFamily {
  static constexpr const char* name = "Gemma";
  static constexpr bool gemma = true;
};

// The configuration: HF's LlamaConfig / GemmaConfig keys and defaults.
struct LlamaConfig : SpecialTokens {
  long vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0, num_attention_heads = 0,
       num_key_value_heads = 0, head_dim_ = 0, max_position_embeddings = 0;
  double rms_norm_eps = 1e-6, rope_theta = 10000.0;
  bool tie_word_embeddings = false;

  template <class Family>
  static LlamaConfig from(const JsonConfig& c) {
    constexpr bool gemma = Family::gemma;
    constexpr long kMaxExtent = long{1} << 31;
    LlamaConfig g;
    g.read(c);
    g.vocab_size = c.integer("vocab_size", gemma ? 256000 : 32000, 1, kMaxExtent);
    g.hidden_size = c.integer("hidden_size", gemma ? 3072 : 4096, 1, kMaxExtent);
    g.intermediate_size = c.integer("intermediate_size", gemma ? 24576 : 11008, 1, kMaxExtent);
    g.num_hidden_layers = c.integer("num_hidden_layers", gemma ? 28 : 32, 0, 1 << 16);
    g.num_attention_heads = c.integer("num_attention_heads", gemma ? 16 : 32, 1, kMaxExtent);
    g.num_key_value_heads = c.integer("num_key_value_heads", g.num_attention_heads, 1, kMaxExtent);
    g.head_dim_ = c.integer("head_dim", gemma ? 256 : g.hidden_size / g.num_attention_heads, 1, kMaxExtent);
    g.max_position_embeddings = c.integer("max_position_embeddings", gemma ? 8192 : 2048, 1, kMaxExtent);
    g.rms_norm_eps = c.number("rms_norm_eps", 1e-6, 0, 1);
    g.rope_theta = c.number("rope_theta", 10000.0, 1.0 + 1e-9, 1e30);
    g.tie_word_embeddings = c.boolean("tie_word_embeddings", gemma);
    if (g.num_attention_heads % g.num_key_value_heads != 0)
      c.fail("\"num_attention_heads\" (" + std::to_string(g.num_attention_heads) +
             ") is not a multiple of \"num_key_value_heads\" (" + std::to_string(g.num_key_value_heads) + ")");
    if (g.head_dim_ % 2 != 0) c.fail("the head dimension (" + std::to_string(g.head_dim_) + ") is odd; rotary embedding pairs its halves");
    const std::string act = gemma ? c.string("hidden_activation", c.string("hidden_act", "gelu_pytorch_tanh"))
                                  : c.string("hidden_act", "silu");
    const bool act_ok = gemma ? (act == "gelu_pytorch_tanh" || act == "gelu" || act == "gelu_new") : act == "silu";
    if (!act_ok)
      unsupported<Family>(c, "the activation is \"" + act + "\"; kiln's " + Family::name + " has " +
                                 (gemma ? "the tanh GELU (gelu_pytorch_tanh)" : "silu"));
    if (c.has("rope_scaling")) unsupported<Family>(c, "\"rope_scaling\" is set");
    if (c.boolean("attention_bias", false)) unsupported<Family>(c, "\"attention_bias\" is true");
    if (c.boolean("mlp_bias", false)) unsupported<Family>(c, "\"mlp_bias\" is true");
    return g;
  }
  long hidden() const { return hidden_size; }
  long head_dim() const { return head_dim_; }
  long kv_heads() const { return num_key_value_heads; }
  long max_positions() const { return max_position_embeddings; }

 private:
  template <class Family>
  [[noreturn]] static void unsupported(const JsonConfig& c, const std::string& why) {
    throw ValueError(std::string(Family::name) + " " + c.what() + ": " + why + ", which is not supported");
  }
};

// The symbols and expressions of the compiled programs, in element type T.
template <class T, class Family>
struct LlamaGraph : CacheSymbols<T> {
  using Cache = CacheSymbols<T>;
  static constexpr auto input_ids = input<"input_ids", 2, i64>();
  static constexpr auto embed_tokens = param<"embed_tokens", 2, T>();
  static constexpr auto h = input<"h", 3, T>();  // the residual stream, [batch, seq, hidden]
  static constexpr auto cos = input<"rope_cos", 4, T>();  // [batch, 1, seq, head_dim], this call's positions
  static constexpr auto sin = input<"rope_sin", 4, T>();
  static constexpr auto in_norm = param<"input_layernorm.weight", 1, T>();
  static constexpr auto q_w = param<"self_attn.q_proj.weight", 2, T>();
  static constexpr auto k_w = param<"self_attn.k_proj.weight", 2, T>();
  static constexpr auto v_w = param<"self_attn.v_proj.weight", 2, T>();
  static constexpr auto o_w = param<"self_attn.o_proj.weight", 2, T>();
  static constexpr auto post_norm = param<"post_attention_layernorm.weight", 1, T>();
  static constexpr auto gate_w = param<"mlp.gate_proj.weight", 2, T>();
  static constexpr auto up_w = param<"mlp.up_proj.weight", 2, T>();
  static constexpr auto down_w = param<"mlp.down_proj.weight", 2, T>();
  static constexpr auto final_norm = param<"norm.weight", 1, T>();
  static constexpr auto lm_head = param<"lm_head.weight", 2, T>();

  template <class X, class W>
  static constexpr auto norm(X x, W w, double eps) {
    if constexpr (Family::gemma) return rms_norm(x, 1.0 + w, eps);
    else return rms_norm(x, w, eps);
  }
  static auto embed(double scale) {
    if constexpr (Family::gemma) return embedding(input_ids, embed_tokens) * scale;
    else return embedding(input_ids, embed_tokens);
  }

  // One layer, its attention given as attend(q, k, v) -> {o, extra outputs} on heads
  // [B, heads, S, D]; [B, S, heads * D] -> [B, S, heads, D] -> [B, heads, S, D] are views.
  // The values read in several places (rope reads its operand three times) are kiln::shared:
  // kernels materialise them anyway, and naming them keeps the expression a DAG, which
  // compiles 2.5 times faster than the tree it would otherwise be.
  template <class Attend>
  static auto block(const LlamaConfig& c, Attend attend) {
    const long H = c.num_attention_heads, Hkv = c.num_key_value_heads;
    const double eps = c.rms_norm_eps;
    const auto a = shared<"attn_in">(norm(h, in_norm, eps));
    const auto heads = [](auto x, long n) { return transpose<1, 2>(unflatten<2>(x, {n, -1})); };
    const auto q = rope(shared<"q">(heads(matmul(a, transpose(q_w)), H)), cos, sin);
    const auto k = rope(shared<"k">(heads(matmul(a, transpose(k_w)), Hkv)), cos, sin);
    const auto v = heads(matmul(a, transpose(v_w)), Hkv);
    const auto [o, extra] = attend(q, k, v);
    const auto h1 = shared<"h1">(h + matmul(flatten<2, 3>(transpose<1, 2>(o)), transpose(o_w)));
    const auto m = shared<"mlp_in">(norm(h1, post_norm, eps));
    const auto gate = matmul(m, transpose(gate_w)), up = matmul(m, transpose(up_w));
    if constexpr (Family::gemma) return std::pair{h1 + matmul(gelu_tanh(gate) * up, transpose(down_w)), extra};
    else return std::pair{h1 + matmul(swiglu(gate, up), transpose(down_w)), extra};
  }
  static auto layer(const LlamaConfig& c) {
    return block(c, [](auto q, auto k, auto v) { return std::pair{Cache::windowed_attention(q, k, v), 0}; }).first;
  }
  static auto cached_layer(const LlamaConfig& c) {
    const auto [h_out, caches] = block(c, [](auto q, auto k, auto v) { return Cache::cached_attention(q, k, v); });
    return Cache::with_caches(h_out, caches);
  }

  // The logits: in T for float and double, in float for the 16-bit types.
  using Logits = std::conditional_t<(sizeof(T) < sizeof(float)), float, T>;
  static auto head(double eps) { return cast<Logits>(matmul(norm(h, final_norm, eps), transpose(lm_head))); }
};

template <class T>
struct LlamaLayer {
  Tensor<T> in_norm, q_w, k_w, v_w, o_w, post_norm, gate_w, up_w, down_w;
};

// Llama and Gemma as models/decoder.hpp's architecture.
template <class T, class Family>
struct LlamaArch {
  using element = T;
  using Config = LlamaConfig;
  using Graph = LlamaGraph<T, Family>;
  using Logits = typename Graph::Logits;
  using Layer = LlamaLayer<T>;
  static constexpr const char* name = Family::name;
  struct Weights {
    LlamaConfig config;
    Tensor<T> embed_tokens, final_norm, lm_head;  // lm_head: embed_tokens when tied
    std::vector<Layer> layers;
  };

  // HF's names: model.embed_tokens.weight, model.layers.<i>.…, model.norm.weight, lm_head.weight.
  static Weights load(const std::string& dir, Device device) {
    Weights w;
    w.config = LlamaConfig::from<Family>(JsonConfig(dir + "/config.json"));
    const LlamaConfig& c = w.config;
    const Checkpoint ckpt(dir);
    auto get = [&](const std::string& n, Shape want) {
      Tensor<T> t = ckpt.get<T>(n, device);
      if (t.shape() != want)
        throw ShapeError(std::string(Family::name) + " checkpoint " + dir + ": \"" + n + "\" has shape " + t.shape().str() +
                         ", the configuration gives " + want.str());
      return t;
    };
    const auto z = [](long v) { return static_cast<std::size_t>(v); };
    const std::size_t E = z(c.hidden_size), I = z(c.intermediate_size), D = z(c.head_dim_);
    const std::size_t HD = z(c.num_attention_heads) * D, KD = z(c.num_key_value_heads) * D;
    w.embed_tokens = get("model.embed_tokens.weight", {z(c.vocab_size), E});
    w.final_norm = get("model.norm.weight", {E});
    w.lm_head = c.tie_word_embeddings ? w.embed_tokens : get("lm_head.weight", {z(c.vocab_size), E});
    for (long i = 0; i < c.num_hidden_layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      w.layers.push_back({get(p + "input_layernorm.weight", {E}), get(p + "self_attn.q_proj.weight", {HD, E}),
                          get(p + "self_attn.k_proj.weight", {KD, E}), get(p + "self_attn.v_proj.weight", {KD, E}),
                          get(p + "self_attn.o_proj.weight", {E, HD}), get(p + "post_attention_layernorm.weight", {E}),
                          get(p + "mlp.gate_proj.weight", {I, E}), get(p + "mlp.up_proj.weight", {I, E}),
                          get(p + "mlp.down_proj.weight", {E, I})});
    }
    return w;
  }

  // Gemma scales the embeddings by sqrt(hidden_size), rounded to T as HF does.
  static auto embed_program(const Config& c) {
    return Graph::embed(static_cast<double>(widen(detail::element_from<T>(std::sqrt(static_cast<double>(c.hidden_size))))));
  }
  static auto layer_program(const Config& c) { return Graph::layer(c); }
  static auto cached_layer_program(const Config& c) { return Graph::cached_layer(c); }
  static auto head_program(const Config& c) { return Graph::head(c.rms_norm_eps); }

  // What a call reads for positions [first, first + seq) of each sequence (numbered from its
  // first token after pads[b]): the rotary tables, [batch, 1, seq, head_dim].
  using Positions = std::pair<Tensor<T>, Tensor<T>>;
  static Positions positions(const Weights& w, std::size_t first, std::size_t seq, const std::vector<std::size_t>& pads,
                             Device device) {
    const std::vector<long> p = token_positions(first, seq, pads);
    const auto [c, s] = rope_tables<T>(std::span<const long>(p), w.config.head_dim_, w.config.rope_theta);
    const Shape shape{pads.size(), 1, seq, static_cast<std::size_t>(w.config.head_dim_)};
    const auto to = [&](const Tensor<T>& t) { return from_vector(std::vector<T>(t.data(), t.data() + t.numel()), shape, device); };
    return {to(c), to(s)};
  }
  template <class F>
  static Tensor<T> embed(F& f, const Weights& w, const Tensor<i64>& ids, const Positions&) {
    return f(Graph::input_ids = ids, Graph::embed_tokens = w.embed_tokens);
  }
  template <class F, class... Extra>
  static auto layer(F& f, const Weights&, const Layer& l, const Tensor<T>& h, const Positions& pos, Extra... extra) {
    using G = Graph;
    return f(G::h = h, G::cos = pos.first, G::sin = pos.second, G::in_norm = l.in_norm, G::q_w = l.q_w, G::k_w = l.k_w,
             G::v_w = l.v_w, G::o_w = l.o_w, G::post_norm = l.post_norm, G::gate_w = l.gate_w, G::up_w = l.up_w,
             G::down_w = l.down_w, extra...);
  }
  template <class F>
  static auto head(F& f, const Weights& w, const Tensor<T>& h) {
    return f(Graph::h = h, Graph::final_norm = w.final_norm, Graph::lm_head = w.lm_head);
  }
};

// kiln::models::Llama<T>::from_pretrained(dir, device) (LlamaForCausalLM, and checkpoints of
// the same layout) and kiln::models::Gemma<T> (GemmaForCausalLM); then
// kiln::compile<Policies...>(model).
template <class T>
using Llama = Model<LlamaArch<T, LlamaFamily>>;
template <class T>
using Gemma = Model<LlamaArch<T, GemmaFamily>>;

}  // namespace kiln::models
