// kiln: what every decoder-only language model of kiln::models shares: loading, compiling with
// a policy, the forward call and greedy generation with a static KV cache. An architecture
// (GPT2Arch in gpt2.hpp, LlamaArch in llama.hpp) says what differs:
//   element, Config (max_positions(), kv_heads(), head_dim()), Weights (config and
//   layers), Logits, name;
//   load(dir, device) -> Weights;
//   the four expressions: embed_program(c), layer_program(c), cached_layer_program(c) (the layer
//   with its KV cache, outputs(h, assign(k_cache, ...), assign(v_cache, ...))), head_program(c);
//   Positions positions(weights, first, seq, device): what the programs read for positions
//   [first, first + seq) (position ids, or rotary tables);
//   embed(f, weights, ids, positions), layer(f, weights, layer, h, positions, extra bindings...),
//   head(f, weights, h): a compiled program called with its bindings.
// Compilation is regional, as torch.compile's guides recommend for repeated blocks: one program
// for the embedding, one for a layer (called once per layer with that layer's weights), one for
// the head, and for generate() the layer with its cache; none depends on the number of layers.
#pragma once
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/expr/ops.hpp"
#include "kiln/runtime/compile.hpp"

namespace kiln::models {

// Options of generate(), by the names of HF's GenerationConfig. eos_token_id and pad_token_id
// default to the model's configuration (config.json); the pad defaults to the first eos.
struct GenerationConfig {
  long max_new_tokens = 32;
  std::optional<std::vector<long>> eos_token_id;  // {} for none: always max_new_tokens tokens
  std::optional<long> pad_token_id;
};

template <class Arch, class... Policies>
class CompiledDecoder;

// A loaded model: its weights (held once, shared by every compiled object) and device.
template <class Arch>
class Model {
 public:
  using Weights = typename Arch::Weights;
  using Config = typename Arch::Config;

  // Reads dir/config.json and the checkpoint in dir (model.safetensors, or the shards of
  // model.safetensors.index.json), converting the weights to the element type on `device`.
  // A FileError names a missing or unreadable file or tensor, a ShapeError a tensor whose shape
  // does not match the configuration, a ValueError a configuration kiln does not implement.
  static Model from_pretrained(const std::string& dir, Device device = Device::cpu()) {
    return Model(std::make_shared<const Weights>(Arch::load(dir, device)), device);
  }

  const Config& config() const { return w_->config; }
  Device device() const { return device_; }
  const Weights& weights() const { return *w_; }

  // kiln::compile<Policies...>(model) calls this.
  template <class... Policies>
  CompiledDecoder<Arch, Policies...> compiled() const {
    return CompiledDecoder<Arch, Policies...>(w_, device_);
  }

 private:
  Model(std::shared_ptr<const Weights> w, Device device) : w_(std::move(w)), device_(device) {}
  std::shared_ptr<const Weights> w_;
  Device device_;
};

// A model compiled with Policies.
template <class Arch, class... Policies>
class CompiledDecoder {
  using T = typename Arch::element;
  using Logits = typename Arch::Logits;

 public:
  CompiledDecoder(std::shared_ptr<const typename Arch::Weights> w, Device device)
      : w_(std::move(w)),
        device_(device),
        embed_(compile<Policies...>(Arch::embed_program(w_->config))),
        layer_(compile<Policies...>(Arch::layer_program(w_->config))),
        cached_(compile<Policies...>(Arch::cached_layer_program(w_->config))),
        head_(compile<Policies...>(Arch::head_program(w_->config))) {}

  // Logits [batch, seq, vocab] for input_ids [batch, seq] (i64, on the model's device), at
  // positions 0..seq-1; float for a 16-bit model, else the model's type. A sequence longer
  // than the model's positions, or an id outside the vocabulary, is an error before any
  // kernel runs.
  Tensor<Logits> operator()(const Tensor<i64>& input_ids) {
    check_ids(input_ids);
    const auto pos = Arch::positions(*w_, 0, input_ids.shape()[1], device_);
    Tensor<T> h = Arch::embed(embed_, *w_, input_ids, pos);
    for (const auto& l : w_->layers) h = Arch::layer(layer_, *w_, l, h, pos);
    return Arch::head(head_, *w_, h);
  }

  // Greedy decoding with a static KV cache, as HF's generate(do_sample=False): the prompt
  // input_ids [batch, seq] runs once, filling each layer's cache, then each new token is one
  // step of seq 1 at the next position. The token chosen is the largest logit of the last
  // position (the first on a tie). A sequence that has produced an end-of-sequence token gets
  // the pad token from then on, and generation stops once every sequence has (or after
  // max_new_tokens). Returns [batch, seq + the steps run]: the prompt and the new tokens.
  // Each layer's cache is [batch, kv_heads, seq + max_new_tokens, head_dim], at most the
  // model's positions.
  Tensor<i64> generate(const Tensor<i64>& input_ids, const GenerationConfig& gen = {}) {
    const auto& c = w_->config;
    check_ids(input_ids);
    if (gen.max_new_tokens < 0)
      throw ValueError(std::string(Arch::name) + " generate: max_new_tokens is " + std::to_string(gen.max_new_tokens) +
                       ", below 0");
    const std::vector<long> eos = gen.eos_token_id.value_or(c.eos_token_ids);
    const long pad = gen.pad_token_id.value_or(c.pad_token_id >= 0 ? c.pad_token_id : eos.empty() ? 0 : eos.front());
    const std::size_t B = input_ids.shape()[0], S = input_ids.shape()[1], N = static_cast<std::size_t>(gen.max_new_tokens);
    const std::size_t L = S + N;
    if (L > static_cast<std::size_t>(c.max_positions()))
      throw ShapeError(std::string(Arch::name) + " generate: " + std::to_string(S) + " prompt tokens and " +
                       std::to_string(N) + " new ones need " + std::to_string(L) + " positions, more than the model's (" +
                       std::to_string(c.max_positions()) + ")");
    const std::size_t H = static_cast<std::size_t>(c.kv_heads()), D = static_cast<std::size_t>(c.head_dim());
    std::vector<Tensor<T>> kc, vc;
    for (std::size_t l = 0; l < w_->layers.size(); ++l) {
      kc.push_back(zeros<T>({B, H, L, D}, device_));
      vc.push_back(zeros<T>({B, H, L, D}, device_));
    }
    const auto prompt = input_ids.cpu();
    std::vector<std::vector<i64>> tokens(B);
    for (std::size_t b = 0; b < B; ++b) tokens[b].assign(prompt.data() + b * S, prompt.data() + (b + 1) * S);
    std::vector<bool> finished(B, false);
    Tensor<i64> step_ids = input_ids;
    for (std::size_t t = 0; t < N && std::find(finished.begin(), finished.end(), false) != finished.end(); ++t) {
      const std::size_t first = t == 0 ? 0 : S + t - 1, seq = t == 0 ? S : 1;
      const auto logits = forward_cached(step_ids, first, kc, vc).cpu();  // [B, seq, V]
      const std::size_t V = logits.shape()[2];
      std::vector<i64> next(B);
      for (std::size_t b = 0; b < B; ++b) {
        const auto* row = logits.data() + (b * seq + seq - 1) * V;
        std::size_t best = 0;
        for (std::size_t v = 1; v < V; ++v)
          if (row[v] > row[best]) best = v;
        next[b] = finished[b] ? static_cast<i64>(pad) : static_cast<i64>(best);
        finished[b] = finished[b] || std::find(eos.begin(), eos.end(), static_cast<long>(next[b])) != eos.end();
        tokens[b].push_back(next[b]);
      }
      step_ids = from_vector(next, Shape{B, 1}, device_);
    }
    std::vector<i64> flat;
    for (const auto& row : tokens) flat.insert(flat.end(), row.begin(), row.end());
    return from_vector(flat, Shape{B, tokens[0].size()}, device_);
  }

  const typename Arch::Config& config() const { return w_->config; }
  // The programs' plans (explain() of each).
  std::string explain() const {
    return "embedding:\n" + embed_.explain() + "\nlayer (run once per layer):\n" + layer_.explain() +
           "\nlayer with a KV cache (generate):\n" + cached_.explain() + "\nhead:\n" + head_.explain();
  }

 private:
  void check_ids(const Tensor<i64>& ids) const {
    if (ids.rank() != 2 || ids.shape()[1] == 0)
      throw ShapeError(std::string(Arch::name) + ": input_ids must be [batch, seq] with seq >= 1, not " + ids.shape().str());
    if (ids.shape()[1] > static_cast<std::size_t>(w_->config.max_positions()))
      throw ShapeError(std::string(Arch::name) + ": a sequence of " + std::to_string(ids.shape()[1]) +
                       " tokens is longer than the model's positions (" + std::to_string(w_->config.max_positions()) + ")");
  }
  static Tensor<i64> scalar(std::size_t v, Device device) {
    return from_vector(std::vector<i64>{static_cast<i64>(v)}, Shape{}, device);
  }
  // The logits of ids [B, seq] at positions [first, first + seq), through the caches (updated).
  Tensor<Logits> forward_cached(const Tensor<i64>& ids, std::size_t first, std::vector<Tensor<T>>& kc,
                                std::vector<Tensor<T>>& vc) {
    using G = typename Arch::Graph;
    const std::size_t seq = ids.shape()[1];
    const auto at = scalar(first, device_), len = scalar(first + seq, device_);
    const auto pos = Arch::positions(*w_, first, seq, device_);
    Tensor<T> h = Arch::embed(embed_, *w_, ids, pos);
    for (std::size_t l = 0; l < w_->layers.size(); ++l) {
      auto [next] = Arch::layer(cached_, *w_, w_->layers[l], h, pos, G::k_cache = kc[l], G::v_cache = vc[l],
                                G::cache_pos = at, G::kv_len = len);
      h = std::move(next);
    }
    return Arch::head(head_, *w_, h);
  }

  std::shared_ptr<const typename Arch::Weights> w_;
  Device device_;
  decltype(compile<Policies...>(Arch::embed_program(std::declval<const typename Arch::Config&>()))) embed_;
  decltype(compile<Policies...>(Arch::layer_program(std::declval<const typename Arch::Config&>()))) layer_;
  decltype(compile<Policies...>(Arch::cached_layer_program(std::declval<const typename Arch::Config&>()))) cached_;
  decltype(compile<Policies...>(Arch::head_program(std::declval<const typename Arch::Config&>()))) head_;
};

// The KV-cache symbols every architecture's graph declares, [batch, kv_heads, length,
// head_dim], and where a call's tokens go: positions [cache_pos, cache_pos + seq), kv_len =
// cache_pos + seq.
template <class T>
struct CacheSymbols {
  static constexpr auto k_cache = input<"k_cache", 4, T>();
  static constexpr auto v_cache = input<"v_cache", 4, T>();
  static constexpr auto cache_pos = input<"cache_pos", 0, i64>();
  static constexpr auto kv_len = input<"kv_len", 0, i64>();

  // k and v [B, kv_heads, seq, D] written into the caches at cache_pos (in place, under the
  // program's assign), and causal attention of q over the first kv_len cached positions (query
  // i, at position cache_pos + i, sees positions <= cache_pos + i). Returns {attention output,
  // {updated k cache, updated v cache}}.
  // The updated caches are kiln::shared so that the write_slice the attention reads and the one
  // the program assigns are one node (kiln merges repeated subexpressions only where they hold
  // no run-time constants): the cache is then written in place, once, and not copied.
  template <class Q, class K, class V>
  static constexpr auto cached_attention(Q q, K k, V v) {
    const auto kc = shared<"k_cache_new">(write_slice<2>(k_cache, cache_pos, k));
    const auto vc = shared<"v_cache_new">(write_slice<2>(v_cache, cache_pos, v));
    return std::pair{attention<causal>(q, kc, vc, kv_len), std::pair{kc, vc}};
  }
  // The layer's outputs under generate(): h, and the caches assigned in place.
  template <class H, class Caches>
  static constexpr auto with_caches(H h, Caches caches) {
    return outputs(h, assign(k_cache, caches.first), assign(v_cache, caches.second));
  }
};

}  // namespace kiln::models

namespace kiln {
inline namespace KILN_BACKEND_NS {
// kiln::compile<Policies...>(model) for a kiln::models model: the model compiled as a whole.
template <class... Policies, class Arch>
auto compile(const models::Model<Arch>& model) {
  return model.template compiled<Policies...>();
}
}  // inline namespace KILN_BACKEND_NS
}  // namespace kiln
