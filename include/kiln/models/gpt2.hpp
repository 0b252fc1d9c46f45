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
//   h_0 = wte[ids] + wpe[positions]
//   per layer:  a = ln_1(h);  [q k v] = a W_attn + b_attn, each split into H heads
//               h = h + attention_causal(q, k, v) W_proj + b_proj          (scale 1 / sqrt(D))
//               h = h + gelu_tanh(ln_2(h) W_fc + b_fc) W_mproj + b_mproj
//   logits = ln_f(h) wteᵀ                                                  (the tied head)
// Weights are HF's Conv1D layout, [in, out], so each projection is x W. Compilation is regional,
// as torch.compile's guides recommend for repeated blocks: one compiled program for the
// embedding, one for a layer (called n_layer times with each layer's weights) and one for the
// head, whatever the number of layers; generate() adds the layer with a static KV cache.
//
// Supported configurations: activation_function gelu_new, gelu_pytorch_tanh or gelu_fast (the
// tanh form); scale_attn_weights true; scale_attn_by_inverse_layer_idx and
// reorder_and_upcast_attn false. Anything else is a ValueError naming the key, rather than a
// model that silently computes something else.
#pragma once
#include <memory>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "kiln/expr/ops.hpp"
#include "kiln/models/gpt2_config.hpp"
#include "kiln/runtime/compile.hpp"

namespace kiln::models {

// The symbols and expressions of GPT-2's compiled programs, in element type T.
template <class T>
struct GPT2Graph {
  static constexpr auto input_ids = input<"input_ids", 2, i64>();
  static constexpr auto position_ids = input<"position_ids", 1, i64>();
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

  // The KV cache of one layer, [batch, n_head, length, head_dim] each, and where a call's
  // tokens go: positions [cache_pos, cache_pos + seq) of the cache, kv_len = cache_pos + seq.
  static constexpr auto k_cache = input<"k_cache", 4, T>();
  static constexpr auto v_cache = input<"v_cache", 4, T>();
  static constexpr auto cache_pos = input<"cache_pos", 0, i64>();
  static constexpr auto kv_len = input<"kv_len", 0, i64>();

  static constexpr auto embed() { return embedding(input_ids, wte) + embedding(position_ids, wpe); }

  // One layer, its attention given as attend(q, k, v) -> {o, extra outputs}, the heads
  // [B, H, S, D]. [B, S, E] -> [B, S, H, D] -> [B, H, S, D] are views (no copy): the kernels
  // read them through their strides. Returns {h after the layer, the extra outputs}.
  template <class Attend>
  static auto block(long heads, double eps, Attend attend) {
    const auto a = layer_norm(h, ln1_w, ln1_b, eps);
    const auto [q, k, v] = chunk<3, 2>(matmul(a, attn_w) + attn_b);
    const auto split = [heads](auto x) { return transpose<1, 2>(unflatten<2>(x, {heads, -1})); };
    const auto [o, extra] = attend(split(q), split(k), split(v));
    const auto h1 = h + matmul(flatten<2, 3>(transpose<1, 2>(o)), proj_w) + proj_b;
    const auto m = gelu_tanh(matmul(layer_norm(h1, ln2_w, ln2_b, eps), fc_w) + fc_b);
    return std::pair{h1 + matmul(m, mproj_w) + mproj_b, extra};
  }
  static auto layer(long heads, double eps) {
    return block(heads, eps, [](auto q, auto k, auto v) { return std::pair{attention<causal>(q, k, v), 0}; }).first;
  }
  // The layer with a static KV cache: this call's k and v written into the caches at cache_pos
  // (in place), and each query attending to the first kv_len cached positions, causally
  // (query i, at position cache_pos + i, sees positions <= cache_pos + i). One program serves
  // the prompt (cache_pos 0, seq = its length) and every decode step (seq 1).
  static auto cached_layer(long heads, double eps) {
    const auto [h_out, caches] = block(heads, eps, [](auto q, auto k, auto v) {
      const auto kc = write_slice<2>(k_cache, cache_pos, k);
      const auto vc = write_slice<2>(v_cache, cache_pos, v);
      return std::pair{attention<causal>(q, kc, vc, kv_len), std::pair{kc, vc}};
    });
    return outputs(h_out, assign(k_cache, caches.first), assign(v_cache, caches.second));
  }

  // The logits: in T for float and double, in float for the 16-bit types.
  using Logits = std::conditional_t<(sizeof(T) < sizeof(float)), float, T>;
  static auto head(double eps) { return cast<Logits>(matmul(layer_norm(h, lnf_w, lnf_b, eps), transpose(wte))); }
};

template <class T, class... Policies>
class CompiledGPT2;

// Options of generate(), by the names of HF's GenerationConfig.
struct GenerationConfig {
  long max_new_tokens = 32;
};

// The weights of one layer, by HF's names after "h.<i>.".
template <class T>
struct GPT2Layer {
  Tensor<T> ln1_w, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, mproj_w, mproj_b;
};

template <class T>
class GPT2 {
 public:
  struct Weights {
    GPT2Config config;
    Tensor<T> wte, wpe, lnf_w, lnf_b;
    std::vector<GPT2Layer<T>> layers;
  };

  // Reads dir/config.json and the checkpoint in dir (HF's names, with or without the
  // "transformer." prefix GPT2LMHeadModel saves), converting the weights to T on `device`.
  // A FileError names a missing or unreadable file or tensor, a ShapeError a tensor whose shape
  // does not match the configuration, a ValueError a configuration kiln does not support.
  static GPT2 from_pretrained(const std::string& dir, Device device = Device::cpu()) {
    auto w = std::make_shared<Weights>();
    w->config = GPT2Config::from(JsonConfig(dir + "/config.json"));
    const GPT2Config& c = w->config;
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
    w->wte = get("wte.weight", {static_cast<std::size_t>(c.vocab_size), E});
    w->wpe = get("wpe.weight", {static_cast<std::size_t>(c.n_positions), E});
    w->lnf_w = get("ln_f.weight", {E});
    w->lnf_b = get("ln_f.bias", {E});
    for (long i = 0; i < c.n_layer; ++i) {
      const std::string p = "h." + std::to_string(i) + ".";
      w->layers.push_back({get(p + "ln_1.weight", {E}), get(p + "ln_1.bias", {E}), get(p + "attn.c_attn.weight", {E, 3 * E}),
                           get(p + "attn.c_attn.bias", {3 * E}), get(p + "attn.c_proj.weight", {E, E}),
                           get(p + "attn.c_proj.bias", {E}), get(p + "ln_2.weight", {E}), get(p + "ln_2.bias", {E}),
                           get(p + "mlp.c_fc.weight", {E, I}), get(p + "mlp.c_fc.bias", {I}),
                           get(p + "mlp.c_proj.weight", {I, E}), get(p + "mlp.c_proj.bias", {E})});
    }
    return GPT2(std::move(w), device);
  }

  const GPT2Config& config() const { return w_->config; }
  Device device() const { return device_; }
  const Weights& weights() const { return *w_; }

  // kiln::compile<Policies...>(model) calls this.
  template <class... Policies>
  CompiledGPT2<T, Policies...> compiled() const {
    return CompiledGPT2<T, Policies...>(w_, device_);
  }

 private:
  GPT2(std::shared_ptr<const Weights> w, Device device) : w_(std::move(w)), device_(device) {}
  std::shared_ptr<const Weights> w_;
  Device device_;
};

// GPT-2 compiled with Policies: compiled programs sharing the model's weights (held, not
// copied). A call runs the embedding, each layer in turn and the head; generate() runs the
// layers with their caches instead.
template <class T, class... Policies>
class CompiledGPT2 {
  using Gr = GPT2Graph<T>;

 public:
  CompiledGPT2(std::shared_ptr<const typename GPT2<T>::Weights> w, Device device)
      : w_(std::move(w)),
        device_(device),
        embed_(compile<Policies...>(Gr::embed())),
        layer_(compile<Policies...>(Gr::layer(w_->config.n_head, w_->config.layer_norm_epsilon))),
        cached_(compile<Policies...>(Gr::cached_layer(w_->config.n_head, w_->config.layer_norm_epsilon))),
        head_(compile<Policies...>(Gr::head(w_->config.layer_norm_epsilon))) {}

  // Logits [batch, seq, vocab] for input_ids [batch, seq] (i64, on the model's device), with
  // positions 0..seq-1; float for a 16-bit model, else T. A sequence longer than n_positions, or an id outside the vocabulary,
  // is an error before any kernel runs.
  Tensor<typename Gr::Logits> operator()(const Tensor<i64>& input_ids) {
    check_ids(input_ids);
    Tensor<T> h = embed(input_ids, 0);
    for (const GPT2Layer<T>& l : w_->layers) h = run_layer(layer_, h, l);
    return head(h);
  }

  // Greedy decoding with a static KV cache, as HF's generate(do_sample=False): the prompt
  // input_ids [batch, seq] runs once, filling each layer's cache, then each new token is one
  // step of seq 1 at the next position. Returns [batch, seq + max_new_tokens]: the prompt and
  // the tokens chosen (the largest logit, the first on a tie). The cache holds seq +
  // max_new_tokens positions, at most n_positions.
  Tensor<i64> generate(const Tensor<i64>& input_ids, const GenerationConfig& gen = {}) {
    const auto& c = w_->config;
    check_ids(input_ids);
    if (gen.max_new_tokens < 0) throw ValueError("GPT-2 generate: max_new_tokens is " + std::to_string(gen.max_new_tokens) + ", below 0");
    const std::size_t B = input_ids.shape()[0], S = input_ids.shape()[1], N = static_cast<std::size_t>(gen.max_new_tokens);
    const std::size_t L = S + N;
    if (L > static_cast<std::size_t>(c.n_positions))
      throw ShapeError("GPT-2 generate: " + std::to_string(S) + " prompt tokens and " + std::to_string(N) +
                       " new ones need " + std::to_string(L) + " positions, more than n_positions (" +
                       std::to_string(c.n_positions) + ")");
    const std::size_t H = static_cast<std::size_t>(c.n_head), D = static_cast<std::size_t>(c.head_dim());
    std::vector<Tensor<T>> kc, vc;
    for (std::size_t l = 0; l < w_->layers.size(); ++l) {
      kc.push_back(zeros<T>({B, H, L, D}, device_));
      vc.push_back(zeros<T>({B, H, L, D}, device_));
    }
    const auto prompt = input_ids.cpu();
    std::vector<i64> tokens(B * L);
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t i = 0; i < S; ++i) tokens[b * L + i] = prompt[b * S + i];
    Tensor<i64> step_ids = input_ids;
    for (std::size_t t = 0; t < N; ++t) {
      const std::size_t pos = t == 0 ? 0 : S + t - 1, seq = t == 0 ? S : 1;
      const auto logits = forward_cached(step_ids, pos, kc, vc).cpu();  // [B, seq, V]
      const std::size_t V = logits.shape()[2];
      std::vector<i64> next(B);
      for (std::size_t b = 0; b < B; ++b) {
        const auto* row = logits.data() + (b * seq + seq - 1) * V;
        std::size_t best = 0;
        for (std::size_t v = 1; v < V; ++v)
          if (row[v] > row[best]) best = v;
        next[b] = tokens[b * L + S + t] = static_cast<i64>(best);
      }
      step_ids = from_vector(next, Shape{B, 1}, device_);
    }
    return from_vector(tokens, Shape{B, L}, device_);
  }

  const GPT2Config& config() const { return w_->config; }
  // The programs' plans (explain() of each).
  std::string explain() const {
    return "embedding:\n" + embed_.explain() + "\nlayer (run n_layer times):\n" + layer_.explain() +
           "\nlayer with a KV cache (generate):\n" + cached_.explain() + "\nhead:\n" + head_.explain();
  }

 private:
  void check_ids(const Tensor<i64>& ids) const {
    if (ids.rank() != 2 || ids.shape()[1] == 0)
      throw ShapeError("GPT-2: input_ids must be [batch, seq] with seq >= 1, not " + ids.shape().str());
    if (ids.shape()[1] > static_cast<std::size_t>(w_->config.n_positions))
      throw ShapeError("GPT-2: a sequence of " + std::to_string(ids.shape()[1]) + " tokens is longer than n_positions (" +
                       std::to_string(w_->config.n_positions) + ")");
  }
  static Tensor<i64> scalar(std::size_t v, Device device) { return from_vector(std::vector<i64>{static_cast<i64>(v)}, Shape{}, device); }
  // The embeddings of ids [B, S] at positions [first, first + S).
  Tensor<T> embed(const Tensor<i64>& ids, std::size_t first) {
    std::vector<i64> p(ids.shape()[1]);
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = static_cast<i64>(first + i);
    const auto positions = from_vector(p, Shape{p.size()}, device_);
    return embed_(Gr::input_ids = ids, Gr::position_ids = positions, Gr::wte = w_->wte, Gr::wpe = w_->wpe);
  }
  // A layer program called with layer l's weights, the residual stream h and any other bindings.
  template <class F, class... Extra>
  static auto run_layer(F& f, const Tensor<T>& h, const GPT2Layer<T>& l, Extra... extra) {
    return f(Gr::h = h, Gr::ln1_w = l.ln1_w, Gr::ln1_b = l.ln1_b, Gr::attn_w = l.attn_w, Gr::attn_b = l.attn_b,
             Gr::proj_w = l.proj_w, Gr::proj_b = l.proj_b, Gr::ln2_w = l.ln2_w, Gr::ln2_b = l.ln2_b, Gr::fc_w = l.fc_w,
             Gr::fc_b = l.fc_b, Gr::mproj_w = l.mproj_w, Gr::mproj_b = l.mproj_b, extra...);
  }
  Tensor<typename Gr::Logits> head(const Tensor<T>& h) {
    return head_(Gr::h = h, Gr::lnf_w = w_->lnf_w, Gr::lnf_b = w_->lnf_b, Gr::wte = w_->wte);
  }
  // The logits of ids [B, S] at positions [pos, pos + S), through the caches (updated).
  Tensor<typename Gr::Logits> forward_cached(const Tensor<i64>& ids, std::size_t pos, std::vector<Tensor<T>>& kc,
                                             std::vector<Tensor<T>>& vc) {
    const auto p = scalar(pos, device_), n = scalar(pos + ids.shape()[1], device_);
    Tensor<T> h = embed(ids, pos);
    for (std::size_t l = 0; l < w_->layers.size(); ++l) {
      auto [next] = run_layer(cached_, h, w_->layers[l], Gr::k_cache = kc[l], Gr::v_cache = vc[l], Gr::cache_pos = p,
                              Gr::kv_len = n);
      h = std::move(next);
    }
    return head(h);
  }

  std::shared_ptr<const typename GPT2<T>::Weights> w_;
  Device device_;
  decltype(compile<Policies...>(Gr::embed())) embed_;
  decltype(compile<Policies...>(Gr::layer(1, 0.0))) layer_;
  decltype(compile<Policies...>(Gr::cached_layer(1, 0.0))) cached_;
  decltype(compile<Policies...>(Gr::head(0.0))) head_;
};

}  // namespace kiln::models

namespace kiln {
inline namespace KILN_BACKEND_NS {
// kiln::compile<Policies...>(model) for a kiln::models model: the model compiled as a whole.
template <class... Policies, class T>
auto compile(const models::GPT2<T>& model) {
  return model.template compiled<Policies...>();
}
}  // inline namespace KILN_BACKEND_NS
}  // namespace kiln
