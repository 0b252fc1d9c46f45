// kiln: what every decoder-only language model of kiln::models shares: loading, compiling with
// a policy, the forward call and greedy generation with a static KV cache. An architecture
// (GPT2Arch in gpt2.hpp, LlamaArch in llama.hpp) says what differs:
//   element, Config (max_positions(), kv_heads(), head_dim()), Weights (config and
//   layers), Logits, name;
//   load(dir, device) -> Weights;
//   the four expressions: embed_program(c), layer_program(c), cached_layer_program(c) (the layer
//   with its KV cache, outputs(h, assign(k_cache, ...), assign(v_cache, ...))), head_program(c);
//   Positions positions(weights, first, seq, pads, device): what the programs read for positions
//   [first, first + seq) of each sequence, numbered from its first real token
//   (models/generation.hpp's token_positions; position ids, or rotary tables);
//   embed(f, weights, ids, positions), layer(f, weights, layer, h, positions, extra bindings...),
//   head(f, weights, h): a compiled program called with its bindings.
// Both layer programs read the key windows kv_window [batch, 2] (CacheSymbols): a left-padded
// batch's attention skips each sequence's padding.
// Compilation is regional, as torch.compile's guides recommend for repeated blocks: one program
// for the embedding, one for a layer (called once per layer with that layer's weights), one for
// the head, and for generate() the layer with its cache; none depends on the number of layers.
// The next token is chosen on the device (argmax of the last position's logits), so only token
// ids cross to the host. With CUDA graphs (ReduceOverhead, MaxAutotune) on a CUDA device, a
// forward of one shape is one graph (models/model_graph.hpp): the call, the prompt of generate()
// and each decode step, which replays one graph for every position (the position, the token ids
// and the rotary rows are staged in page-locked memory and copied in by the graph's first
// node; the chosen tokens are copied out by its last).
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/expr/ops.hpp"
#include "kiln/models/generation.hpp"
#include "kiln/models/model_graph.hpp"
#include "kiln/runtime/compile.hpp"

namespace kiln::models {

template <class Arch, class... Policies>
class CompiledDecoder;

// The next token of generate(): the position of the largest logit (the first on a tie; a NaN
// counts as the largest, as torch.argmax), for every position of logits [batch, seq, vocab].
template <class Logits>
struct PickSymbols {
  static constexpr auto logits = input<"logits", 3, Logits>();
  static constexpr auto program() { return argmax<2>(logits); }
};

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
  using Pick = PickSymbols<Logits>;

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
    return forward(input_ids, std::vector<std::size_t>(input_ids.shape()[0], 0));
  }
  // The same for a left-padded batch, as HF's model(input_ids, attention_mask=...): row b of
  // attention_mask (input_ids' shape, 0 for padding then 1) hides sequence b's padding from
  // every token's attention. Positions stay 0..seq-1, as in HF's forward without position_ids.
  // The logits at padded positions are not meaningful (their tokens attend to nothing).
  Tensor<Logits> operator()(const Tensor<i64>& input_ids, const Tensor<i64>& attention_mask) {
    check_ids(input_ids);
    return forward(input_ids, left_padding(attention_mask, input_ids.shape(), std::string(Arch::name)));
  }

  // Decoding with a static KV cache, as HF's generate(): the prompt input_ids [batch, seq] runs
  // once, filling each layer's cache, then each new token is one step of seq 1 at the next
  // position. The token chosen is the largest logit of the last position (the first on a tie),
  // or with do_sample a draw from its logits (models/sampling.hpp). A sequence that has produced
  // an end-of-sequence token gets the pad token from then on, and generation stops once every
  // sequence has (or after max_new_tokens). Returns [batch, seq + the steps run]: the prompt and
  // the new tokens. Each layer's cache is [batch, kv_heads, seq + max_new_tokens, head_dim], at
  // most the model's positions.
  Tensor<i64> generate(const Tensor<i64>& input_ids, const GenerationConfig& gen = {}) {
    check_ids(input_ids);
    return generate_padded(input_ids, std::vector<std::size_t>(input_ids.shape()[0], 0), gen);
  }
  // The same for a batch of prompts of different lengths, left-padded, with HF's attention_mask
  // (input_ids' shape, 0 for padding then 1): each sequence attends to its own tokens only and
  // is numbered from its first real token, so its new tokens are those it would get alone (up to
  // rounding), and those HF's generate(input_ids, attention_mask=...) gives.
  Tensor<i64> generate(const Tensor<i64>& input_ids, const Tensor<i64>& attention_mask, const GenerationConfig& gen = {}) {
    check_ids(input_ids);
    return generate_padded(input_ids, left_padding(attention_mask, input_ids.shape(), std::string(Arch::name) + " generate"),
                           gen);
  }

  const typename Arch::Config& config() const { return w_->config; }
  // The model's CUDA graphs (calls and generate() together): how many were captured, and how
  // many forwards replayed one.
  long graph_captures() const { return forwards_.captures() + generations_.captures(); }
  long graph_replays() const { return forwards_.replays() + generations_.replays(); }
  // Per-kernel timing of the five programs (Compiled::profile): explain() then shows each
  // kernel's mean time per call. While on, forwards and generate() run the programs one by
  // one, not as CUDA graphs, so that each kernel can be timed.
  void profile(bool on = true) {
    profiling_ = on;
    embed_.profile(on), layer_.profile(on), cached_.profile(on), head_.profile(on), pick_.profile(on);
  }
  // The programs' plans (explain() of each).
  std::string explain() const {
    return "embedding:\n" + embed_.explain() + "\nlayer (run once per layer):\n" + layer_.explain() +
           "\nlayer with a KV cache (generate):\n" + cached_.explain() + "\nhead:\n" + head_.explain() +
           "\nnext token (generate):\n" + pick_.explain();
  }

 private:
  void check_ids(const Tensor<i64>& ids) const {
    if (ids.rank() != 2 || ids.shape()[1] == 0)
      throw ShapeError(std::string(Arch::name) + ": input_ids must be [batch, seq] with seq >= 1, not " + ids.shape().str());
    if (ids.shape()[1] > static_cast<std::size_t>(w_->config.max_positions()))
      throw ShapeError(std::string(Arch::name) + ": a sequence of " + std::to_string(ids.shape()[1]) +
                       " tokens is longer than the model's positions (" + std::to_string(w_->config.max_positions()) + ")");
  }
  using Step = StepResult<Logits>;
  using Pads = std::vector<std::size_t>;
  Tensor<Logits> forward(const Tensor<i64>& input_ids, const Pads& pads) {
    using G = typename Arch::Graph;
    if constexpr (model_graphs<Policies...>)
      if (input_ids.is_cuda() && !profiling_) return this->graphed_forward(input_ids, pads);
    const std::size_t B = input_ids.shape()[0], S = input_ids.shape()[1];
    const auto pos = Arch::positions(*w_, 0, S, Pads(B, 0), device_);
    const Tensor<i64> window = key_windows(pads, S, device_);
    Tensor<T> h = Arch::embed(embed_, *w_, input_ids, pos);
    for (const auto& l : w_->layers) h = Arch::layer(layer_, *w_, l, h, pos, G::kv_window = window);
    return Arch::head(head_, *w_, h);
  }
  Tensor<i64> generate_padded(const Tensor<i64>& input_ids, const Pads& pads, const GenerationConfig& gen) {
    const auto& c = w_->config;
    const std::string who = std::string(Arch::name) + " generate";
    if (gen.max_new_tokens < 0)
      throw ValueError(who + ": max_new_tokens is " + std::to_string(gen.max_new_tokens) + ", below 0");
    const std::vector<long> eos = gen.eos_token_id.value_or(c.eos_token_ids);
    const long pad = gen.pad_token_id.value_or(c.pad_token_id >= 0 ? c.pad_token_id : eos.empty() ? 0 : eos.front());
    const std::size_t B = input_ids.shape()[0], S = input_ids.shape()[1], N = static_cast<std::size_t>(gen.max_new_tokens);
    const std::size_t L = S + N, V = static_cast<std::size_t>(c.vocab_size);
    if (L > static_cast<std::size_t>(c.max_positions()))
      throw ShapeError(who + ": " + std::to_string(S) + " prompt tokens and " + std::to_string(N) + " new ones need " +
                       std::to_string(L) + " positions, more than the model's (" + std::to_string(c.max_positions()) + ")");
    if (gen.do_sample) check_sampling(gen.sampling(), who);
    const auto prompt = input_ids.cpu();
    const std::vector<i64> ids(prompt.data(), prompt.data() + B * S);
    const bool sample = gen.do_sample;
    if constexpr (model_graphs<Policies...>) {
      if (device_.is_cuda() && !profiling_) {
        Generation& g = generations_.find({B, S, L, sample}, [&] { return this->make_generation(B, S, L, sample); });
        return decode_tokens<Logits>(ids, B, S, V, eos, pad, gen, who, device_,
                                     [&](const std::vector<i64>& step, std::size_t first, std::size_t) {
                                       return this->graphed_step(g, first == 0 ? g.prompt : g.step, step, first, pads);
                                     });
      }
    }
    Caches caches = make_caches(B, L);
    return decode_tokens<Logits>(ids, B, S, V, eos, pad, gen, who, device_,
                                 [&](const std::vector<i64>& step, std::size_t first, std::size_t seq) {
                                   return eager_step(step, B, seq, first, pads, caches, sample);
                                 });
  }
  static Tensor<i64> scalar(std::size_t v, Device device) {
    return from_vector(std::vector<i64>{static_cast<i64>(v)}, Shape{}, device);
  }
  using Caches = std::pair<std::vector<Tensor<T>>, std::vector<Tensor<T>>>;  // each layer's k and v
  Caches make_caches(std::size_t B, std::size_t L) const {
    const auto& c = w_->config;
    const std::size_t H = static_cast<std::size_t>(c.kv_heads()), D = static_cast<std::size_t>(c.head_dim());
    Caches caches;
    for (std::size_t l = 0; l < w_->layers.size(); ++l) {
      caches.first.push_back(zeros<T>({B, H, L, D}, device_));
      caches.second.push_back(zeros<T>({B, H, L, D}, device_));
    }
    return caches;
  }

  // The forward of ids [B, seq] at positions [first, first + seq) through the caches (updated),
  // each program called through call(program, output buffer): the program itself, or into() it.
  // at is cache_pos (= first) as a rank-0 tensor, window the key windows [B, 2] (sequence b:
  // [pads[b], first + seq)).
  template <class Call, class H, class Out>
  auto cached_forward(Call&& call, const Tensor<i64>& ids, const typename Arch::Positions& pos, const Tensor<i64>& at,
                      const Tensor<i64>& window, Caches& caches, H* h, Out* logits) {
    using G = typename Arch::Graph;
    auto&& embed = call(embed_, h ? &h[0] : nullptr);
    Tensor<T> x = Arch::embed(embed, *w_, ids, pos);
    for (std::size_t l = 0; l < w_->layers.size(); ++l) {
      auto&& layer = call(cached_, h ? &h[(l + 1) % 2] : nullptr);
      auto out = Arch::layer(layer, *w_, w_->layers[l], x, pos, G::k_cache = caches.first[l], G::v_cache = caches.second[l],
                             G::cache_pos = at, G::kv_window = window);
      if constexpr (std::is_same_v<decltype(out), Tensor<T>>) x = std::move(out);
      else x = std::move(std::get<0>(out));
    }
    auto&& head = call(head_, logits);
    return Arch::head(head, *w_, x);
  }
  // Calls a program directly, allocating its outputs.
  struct Direct {
    template <class F, class Out>
    F& operator()(F& f, Out*) const {
      return f;
    }
  };
  // Calls a program into the given output buffer.
  struct IntoBuffers {
    template <class F, class U>
    Into<F, U> operator()(F& f, Tensor<U>* out) const {
      return into(f, *out);
    }
  };

  // One step of generate() without graphs: each sequence's last position's largest logit's
  // token, or with `sample` the last position's logits.
  Step eager_step(const std::vector<i64>& ids, std::size_t B, std::size_t seq, std::size_t first, const Pads& pads,
                  Caches& caches, bool sample) {
    const auto logits = cached_forward(Direct{}, from_vector(ids, Shape{B, seq}, device_),
                                       Arch::positions(*w_, first, seq, pads, device_), scalar(first, device_),
                                       key_windows(pads, first + seq, device_), caches, static_cast<Tensor<T>*>(nullptr),
                                       static_cast<Tensor<Logits>*>(nullptr));
    Step r;
    if (sample) {
      const std::size_t V = logits.shape()[2];
      const auto host = logits.cpu();  // [B, seq, V]
      r.last.resize(B * V);
      for (std::size_t b = 0; b < B; ++b)
        std::copy_n(host.data() + (b * seq + seq - 1) * V, V, r.last.data() + b * V);
      return r;
    }
    const Tensor<i64> best = pick_(Pick::logits = logits).cpu();  // [B, seq]
    r.best.resize(B);
    for (std::size_t b = 0; b < B; ++b) r.best[b] = best[b * seq + seq - 1];
    return r;
  }

  template <class Tn, class F>
  static void each_tensor(Tn& t, F&& f) {
    f(t);
  }
  template <class A, class B, class F>
  static void each_tensor(std::pair<A, B>& p, F&& f) {
    each_tensor(p.first, f);
    each_tensor(p.second, f);
  }

#if KILN_WITH_CUDA
  // One forward shape of generate() under graphs: the staged inputs (token ids, cache_pos,
  // the key windows, the positions' tensors) and their device views, the residual stream's two buffers,
  // the logits, the chosen tokens on the device and in page-locked memory (or, when sampling,
  // the last position's logits in page-locked memory), and the graph.
  struct StepBuffers {
    StagedInputs staged;
    std::size_t ids_slot = 0, at_slot = 0, window_slot = 0;
    std::vector<std::size_t> pos_slots;
    Tensor<i64> ids, at, window, next;
    typename Arch::Positions pos;
    Tensor<T> h[2];
    Tensor<Logits> logits;
    std::unique_ptr<cuda::PinnedBytes> next_host, last_host;
    std::size_t batch = 0, seq = 0;
    bool sample = false;
    ForwardGraph graph;
  };
  // One generate() shape (batch, prompt length, cache length): its caches and two forwards.
  struct Generation {
    Caches caches;
    StepBuffers prompt, step;
    long captures() const { return prompt.graph.captures() + step.graph.captures(); }
    long replays() const { return prompt.graph.replays() + step.graph.replays(); }
  };
  void make_step(StepBuffers& sb, std::size_t B, std::size_t seq, bool sample) {
    sb.batch = B;
    sb.seq = seq;
    sb.sample = sample;
    sb.ids_slot = sb.staged.template add<i64>(Shape{B, seq});
    sb.at_slot = sb.staged.template add<i64>(Shape{});
    sb.window_slot = sb.staged.template add<i64>(Shape{B, 2});
    sb.pos = Arch::positions(*w_, 0, seq, Pads(B, 0), Device::cpu());
    each_tensor(sb.pos, [&](auto& t) {
      using U = typename std::remove_cvref_t<decltype(t)>::value_type;
      sb.pos_slots.push_back(sb.staged.template add<U>(t.shape()));
    });
    sb.staged.allocate(device_);
    sb.ids = sb.staged.template view<i64>(sb.ids_slot, Shape{B, seq});
    sb.at = sb.staged.template view<i64>(sb.at_slot, Shape{});
    sb.window = sb.staged.template view<i64>(sb.window_slot, Shape{B, 2});
    std::size_t i = 0;
    each_tensor(sb.pos, [&](auto& t) {
      using U = typename std::remove_cvref_t<decltype(t)>::value_type;
      t = sb.staged.template view<U>(sb.pos_slots[i++], t.shape());
    });
    const std::size_t E = static_cast<std::size_t>(w_->config.hidden()), V = static_cast<std::size_t>(w_->config.vocab_size);
    sb.h[0] = Tensor<T>(Shape{B, seq, E}, device_);
    sb.h[1] = Tensor<T>(Shape{B, seq, E}, device_);
    sb.logits = Tensor<Logits>(Shape{B, seq, V}, device_);
    sb.next = Tensor<i64>(Shape{B, seq}, device_);
    if (sample) sb.last_host = std::make_unique<cuda::PinnedBytes>(B * V * sizeof(Logits));
    else sb.next_host = std::make_unique<cuda::PinnedBytes>(B * seq * sizeof(i64));
  }
  std::unique_ptr<Generation> make_generation(std::size_t B, std::size_t S, std::size_t L, bool sample) {
    auto g = std::make_unique<Generation>();
    g->caches = make_caches(B, L);
    make_step(g->prompt, B, S, sample);
    make_step(g->step, B, 1, sample);
    return g;
  }
  long plans_dropped() const {
    return embed_.plans_dropped() + layer_.plans_dropped() + cached_.plans_dropped() + head_.plans_dropped() +
           pick_.plans_dropped();
  }
  // One step of generate() under graphs: stages ids [B, seq], positions [first, first + seq)
  // and the key windows, runs the step's graph and returns the chosen tokens (or the last
  // position's logits).
  Step graphed_step(Generation& g, StepBuffers& sb, const std::vector<i64>& ids, std::size_t first, const Pads& pads) {
    sb.staged.set(sb.ids_slot, Tensor<i64>::view(const_cast<i64*>(ids.data()), Shape{sb.batch, sb.seq}));
    i64 at = static_cast<i64>(first);
    sb.staged.set(sb.at_slot, Tensor<i64>::view(&at, Shape{}));
    sb.staged.set(sb.window_slot, key_windows(pads, first + sb.seq));
    auto host_pos = Arch::positions(*w_, first, sb.seq, pads, Device::cpu());
    std::size_t i = 0;
    each_tensor(host_pos, [&](auto& t) { sb.staged.set(sb.pos_slots[i++], t); });
    sb.graph.run(
        [&] {
          sb.staged.upload();
          cached_forward(IntoBuffers{}, sb.ids, sb.pos, sb.at, sb.window, g.caches, sb.h, &sb.logits);
          if (sb.sample) {  // row b: logits[b, seq - 1, :]
            const std::size_t row = sb.logits.shape()[2] * sizeof(Logits);
            KILN_CUDA_CHECK(cudaMemcpy2DAsync(sb.last_host->get(), row, sb.logits.data() + (sb.seq - 1) * sb.logits.shape()[2],
                                              sb.seq * row, row, sb.batch, cudaMemcpyDeviceToHost, cuda::stream()));
          } else {
            pick_.into(sb.next, Pick::logits = sb.logits);
            KILN_CUDA_CHECK(cudaMemcpyAsync(sb.next_host->get(), sb.next.data(), sb.batch * sb.seq * sizeof(i64),
                                            cudaMemcpyDeviceToHost, cuda::stream()));
          }
        },
        [&] { return plans_dropped(); });
    cuda::synchronize();
    Step r;
    if (sb.sample) {
      const auto* last = reinterpret_cast<const Logits*>(sb.last_host->get());
      r.last.assign(last, last + sb.batch * sb.logits.shape()[2]);
      return r;
    }
    const auto* best = reinterpret_cast<const i64*>(sb.next_host->get());
    r.best.resize(sb.batch);
    for (std::size_t b = 0; b < sb.batch; ++b) r.best[b] = best[b * sb.seq + sb.seq - 1];
    return r;
  }

  // The forward of operator() under graphs, per ids shape: the ids and key windows (copied in
  // before each replay), positions 0..seq-1, the residual stream's buffers and the logits.
  struct Forward {
    Tensor<i64> ids, window;
    typename Arch::Positions pos;
    Tensor<T> h[2];
    Tensor<Logits> logits;
    ForwardGraph graph;
    long captures() const { return graph.captures(); }
    long replays() const { return graph.replays(); }
  };
  Tensor<Logits> graphed_forward(const Tensor<i64>& input_ids, const Pads& pads) {
    using G = typename Arch::Graph;
    const std::size_t B = input_ids.shape()[0], S = input_ids.shape()[1];
    Forward& f = forwards_.find(input_ids.shape(), [&] {
      auto n = std::make_unique<Forward>();
      const std::size_t E = static_cast<std::size_t>(w_->config.hidden()), V = static_cast<std::size_t>(w_->config.vocab_size);
      n->ids = Tensor<i64>(input_ids.shape(), device_);
      n->window = Tensor<i64>(Shape{B, 2}, device_);
      n->pos = Arch::positions(*w_, 0, S, Pads(B, 0), device_);
      n->h[0] = Tensor<T>(Shape{B, S, E}, device_);
      n->h[1] = Tensor<T>(Shape{B, S, E}, device_);
      n->logits = Tensor<Logits>(Shape{B, S, V}, device_);
      return n;
    });
    f.ids.copy_from(input_ids);
    f.window.copy_from(key_windows(pads, S));
    f.graph.run(
        [&] {
          auto embed = into(embed_, f.h[0]);
          Tensor<T> x = Arch::embed(embed, *w_, f.ids, f.pos);
          const std::size_t n = w_->layers.size();
          for (std::size_t l = 0; l < n; ++l) {
            auto layer = into(layer_, f.h[(l + 1) % 2]);
            Arch::layer(layer, *w_, w_->layers[l], f.h[l % 2], f.pos, G::kv_window = f.window);
          }
          auto head = into(head_, f.logits);
          Arch::head(head, *w_, f.h[n % 2]);
        },
        [&] { return plans_dropped(); });
    return Tensor<Logits>(f.logits);  // a copy, queued after the graph
  }
#else
  struct Forward {};
  struct Generation {};
#endif

  std::shared_ptr<const typename Arch::Weights> w_;
  Device device_;
  decltype(compile<Policies...>(Arch::embed_program(std::declval<const typename Arch::Config&>()))) embed_;
  decltype(compile<Policies...>(Arch::layer_program(std::declval<const typename Arch::Config&>()))) layer_;
  decltype(compile<Policies...>(Arch::cached_layer_program(std::declval<const typename Arch::Config&>()))) cached_;
  decltype(compile<Policies...>(Arch::head_program(std::declval<const typename Arch::Config&>()))) head_;
  decltype(compile<Policies...>(Pick::program())) pick_ = compile<Policies...>(Pick::program());
  GraphedShapes<Shape, Forward> forwards_;
  GraphedShapes<std::array<std::size_t, 4>, Generation> generations_;  // (batch, prompt, cache, sampling)
  bool profiling_ = false;
};

// The attention symbols every architecture's graph declares: the KV caches [batch, kv_heads,
// length, head_dim], where a call's tokens go (positions [cache_pos, cache_pos + seq)), and the
// key windows kv_window [batch, 2]: sequence b sees keys [kv_window[b, 0], kv_window[b, 1]),
// its left padding skipped (models/generation.hpp), the end being seq without a cache and
// cache_pos + seq with one.
template <class T>
struct CacheSymbols {
  static constexpr auto k_cache = input<"k_cache", 4, T>();
  static constexpr auto v_cache = input<"v_cache", 4, T>();
  static constexpr auto cache_pos = input<"cache_pos", 0, i64>();
  static constexpr auto kv_window = input<"kv_window", 2, i64>();

  // Causal attention of q [B, H, seq, D] over k and v [B, kv_heads, seq, D] within the windows.
  template <class Q, class K, class V>
  static constexpr auto windowed_attention(Q q, K k, V v) {
    return attention<causal>(q, k, v, kv_window);
  }
  // k and v [B, kv_heads, seq, D] written into the caches at cache_pos (in place, under the
  // program's assign), and causal attention of q over the cached windows (query i, at position
  // cache_pos + i, sees positions <= cache_pos + i from its window's first). Returns {attention
  // output, {updated k cache, updated v cache}}.
  // The updated caches are kiln::shared so that the write_slice the attention reads and the one
  // the program assigns are one node (kiln merges repeated subexpressions only where they hold
  // no run-time constants): the cache is then written in place, once, and not copied.
  template <class Q, class K, class V>
  static constexpr auto cached_attention(Q q, K k, V v) {
    const auto kc = shared<"k_cache_new">(write_slice<2>(k_cache, cache_pos, k));
    const auto vc = shared<"v_cache_new">(write_slice<2>(v_cache, cache_pos, v));
    return std::pair{attention<causal>(q, kc, vc, kv_window), std::pair{kc, vc}};
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
