// kiln: the Vision Transformer (Hugging Face's ViTForImageClassification), loaded from a
// checkpoint directory and compiled with any policy:
//
//   auto vit = kiln::models::ViT<kiln::bf16>::from_pretrained("vit-base-patch16-224", kiln::Device::cuda());
//   auto fast = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(vit);
//   kiln::Tensor<float> logits = fast(pixel_values);   // [batch, 3, 224, 224] -> [batch, num_labels]
//
// The model, for hidden size E, H heads, patch p, N = (image_size / p)² patches:
//   h_0 = [cls; patch_embed(x, W_patch, b_patch, p)] + position_embeddings     [B, N + 1, E]
//   per layer:  a = layernorm_before(h);  q, k, v = a Wᵀ + b, split into H heads (views)
//               h = h + attention(q, k, v) W_oᵀ + b_o                     (scale 1 / sqrt(E / H))
//               h = h + gelu(layernorm_after(h) W_iᵀ + b_i) W_outᵀ + b_out       (exact GELU)
//   logits = layernorm(h)[:, 0] W_clsᵀ + b_cls                              (the CLS token)
// Compilation is regional: one program for the embeddings, one for a layer (called once per
// layer with that layer's weights) and one for the head. With CUDA graphs on a CUDA device the
// three run as one graph per batch size (models/model_graph.hpp).
//
// Supported configurations: hidden_act gelu; qkv_bias true; the image size of the checkpoint
// (its position embeddings are not interpolated). Anything else is a ValueError naming the key.
#pragma once
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/expr/ops.hpp"
#include "kiln/models/config.hpp"
#include "kiln/models/model_graph.hpp"
#include "kiln/runtime/compile.hpp"

namespace kiln::models {

// HF's ViTConfig keys and defaults.
struct ViTConfig {
  long hidden_size = 768, num_hidden_layers = 12, num_attention_heads = 12, intermediate_size = 3072, image_size = 224,
       patch_size = 16, num_channels = 3, num_labels = 2;
  double layer_norm_eps = 1e-12;

  static ViTConfig from(const JsonConfig& c) {
    constexpr long kMaxExtent = long{1} << 31;
    ViTConfig g;
    g.hidden_size = c.integer("hidden_size", g.hidden_size, 1, kMaxExtent);
    g.num_hidden_layers = c.integer("num_hidden_layers", g.num_hidden_layers, 0, 1 << 16);
    g.num_attention_heads = c.integer("num_attention_heads", g.num_attention_heads, 1, kMaxExtent);
    g.intermediate_size = c.integer("intermediate_size", g.intermediate_size, 1, kMaxExtent);
    g.image_size = c.integer("image_size", g.image_size, 1, 1 << 20);
    g.patch_size = c.integer("patch_size", g.patch_size, 1, 1 << 20);
    g.num_channels = c.integer("num_channels", g.num_channels, 1, 1 << 16);
    g.layer_norm_eps = c.number("layer_norm_eps", g.layer_norm_eps, 0, 1);
    // HF counts the labels as the entries of id2label (2 by default).
    g.num_labels = c.has("num_labels") ? c.integer("num_labels", 2, 1, kMaxExtent) : c.entries("id2label", g.num_labels);
    if (g.num_labels < 1) c.fail("\"id2label\" is empty: the classifier has no label");
    if (g.hidden_size % g.num_attention_heads != 0)
      c.fail("\"hidden_size\" (" + std::to_string(g.hidden_size) + ") is not a multiple of \"num_attention_heads\" (" +
             std::to_string(g.num_attention_heads) + ")");
    if (g.image_size % g.patch_size != 0)
      c.fail("\"image_size\" (" + std::to_string(g.image_size) + ") is not a multiple of \"patch_size\" (" +
             std::to_string(g.patch_size) + ")");
    const std::string act = c.string("hidden_act", "gelu");
    if (act != "gelu") unsupported(c, "\"hidden_act\" is \"" + act + "\"; kiln's ViT has the exact GELU (gelu)");
    if (!c.boolean("qkv_bias", true)) unsupported(c, "\"qkv_bias\" is false");
    return g;
  }
  long patches() const { return (image_size / patch_size) * (image_size / patch_size); }

 private:
  [[noreturn]] static void unsupported(const JsonConfig& c, const std::string& why) {
    throw ValueError("ViT " + c.what() + ": " + why + ", which is not supported");
  }
};

// The symbols and expressions of ViT's compiled programs, in element type T.
template <class T>
struct ViTGraph {
  static constexpr auto pixels = input<"pixel_values", 4, T>();
  static constexpr auto patch_w = param<"patch_embeddings.projection.weight", 4, T>();
  static constexpr auto patch_b = param<"patch_embeddings.projection.bias", 1, T>();
  static constexpr auto cls = param<"cls_token", 3, T>();                 // [1, 1, E]
  static constexpr auto pos = param<"position_embeddings", 3, T>();       // [1, N + 1, E]
  static constexpr auto h = input<"h", 3, T>();                           // [B, N + 1, E]
  static constexpr auto ln1_w = param<"layernorm_before.weight", 1, T>();
  static constexpr auto ln1_b = param<"layernorm_before.bias", 1, T>();
  static constexpr auto q_w = param<"attention.query.weight", 2, T>();
  static constexpr auto q_b = param<"attention.query.bias", 1, T>();
  static constexpr auto k_w = param<"attention.key.weight", 2, T>();
  static constexpr auto k_b = param<"attention.key.bias", 1, T>();
  static constexpr auto v_w = param<"attention.value.weight", 2, T>();
  static constexpr auto v_b = param<"attention.value.bias", 1, T>();
  static constexpr auto o_w = param<"attention.output.dense.weight", 2, T>();
  static constexpr auto o_b = param<"attention.output.dense.bias", 1, T>();
  static constexpr auto ln2_w = param<"layernorm_after.weight", 1, T>();
  static constexpr auto ln2_b = param<"layernorm_after.bias", 1, T>();
  static constexpr auto i_w = param<"intermediate.dense.weight", 2, T>();
  static constexpr auto i_b = param<"intermediate.dense.bias", 1, T>();
  static constexpr auto out_w = param<"output.dense.weight", 2, T>();
  static constexpr auto out_b = param<"output.dense.bias", 1, T>();
  static constexpr auto lnf_w = param<"layernorm.weight", 1, T>();
  static constexpr auto lnf_b = param<"layernorm.bias", 1, T>();
  static constexpr auto cls_w = param<"classifier.weight", 2, T>();
  static constexpr auto cls_b = param<"classifier.bias", 1, T>();

  // The CLS token, repeated over the batch, before the patches; then the position embeddings.
  static auto embed(long patch) {
    const auto patches = patch_embed(pixels, patch_w, patch_b, patch);
    return concat<1>(expand_as(cls, slice<1, 0, 1>(patches)), patches) + pos;
  }
  static auto layer(long heads, double eps) {
    const auto a = shared<"attn_in">(layer_norm(h, ln1_w, ln1_b, eps));
    const auto split = [heads](auto x) { return transpose<1, 2>(unflatten<2>(x, {heads, -1})); };
    const auto q = split(matmul(a, transpose(q_w)) + q_b);
    const auto k = split(matmul(a, transpose(k_w)) + k_b);
    const auto v = split(matmul(a, transpose(v_w)) + v_b);
    const auto o = flatten<2, 3>(transpose<1, 2>(attention(q, k, v)));
    const auto h1 = shared<"h1">(h + matmul(o, transpose(o_w)) + o_b);
    const auto m = gelu(matmul(layer_norm(h1, ln2_w, ln2_b, eps), transpose(i_w)) + i_b);
    return h1 + matmul(m, transpose(out_w)) + out_b;
  }
  // The logits: in T for float and double, in float for the 16-bit types.
  using Logits = std::conditional_t<(sizeof(T) < sizeof(float)), float, T>;
  static auto head(double eps) {
    const auto first = flatten<1, 2>(slice<1, 0, 1>(layer_norm(h, lnf_w, lnf_b, eps)));  // [B, E]
    return cast<Logits>(matmul(first, transpose(cls_w)) + cls_b);
  }
};

template <class T>
struct ViTLayer {
  Tensor<T> ln1_w, ln1_b, q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b, ln2_w, ln2_b, i_w, i_b, out_w, out_b;
};

template <class T, class... Policies>
class CompiledViT;

template <class T>
class ViT {
 public:
  struct Weights {
    ViTConfig config;
    Tensor<T> patch_w, patch_b, cls, pos, lnf_w, lnf_b, cls_w, cls_b;
    std::vector<ViTLayer<T>> layers;
  };

  // Reads dir/config.json and the checkpoint in dir (HF's names, with the "vit." prefix
  // ViTForImageClassification saves, or without it), converting the weights to T on `device`.
  // A FileError names a missing or unreadable file or tensor, a ShapeError a tensor whose shape
  // does not match the configuration, a ValueError a configuration kiln does not implement.
  static ViT from_pretrained(const std::string& dir, Device device = Device::cpu()) {
    auto w = std::make_shared<Weights>();
    w->config = ViTConfig::from(JsonConfig(dir + "/config.json"));
    const ViTConfig& c = w->config;
    const Checkpoint ckpt(dir);
    const std::string vit = ckpt.contains("vit.embeddings.cls_token") ? "vit." : "";
    auto get = [&](const std::string& n, Shape want) {
      Tensor<T> t = ckpt.get<T>(n, device);
      if (t.shape() != want)
        throw ShapeError("ViT checkpoint " + dir + ": \"" + n + "\" has shape " + t.shape().str() +
                         ", the configuration gives " + want.str());
      return t;
    };
    const auto z = [](long v) { return static_cast<std::size_t>(v); };
    const std::size_t E = z(c.hidden_size), I = z(c.intermediate_size), P = z(c.patch_size);
    w->patch_w = get(vit + "embeddings.patch_embeddings.projection.weight", {E, z(c.num_channels), P, P});
    w->patch_b = get(vit + "embeddings.patch_embeddings.projection.bias", {E});
    w->cls = get(vit + "embeddings.cls_token", {1, 1, E});
    w->pos = get(vit + "embeddings.position_embeddings", {1, z(c.patches()) + 1, E});
    w->lnf_w = get(vit + "layernorm.weight", {E});
    w->lnf_b = get(vit + "layernorm.bias", {E});
    w->cls_w = get("classifier.weight", {z(c.num_labels), E});
    w->cls_b = get("classifier.bias", {z(c.num_labels)});
    for (long i = 0; i < c.num_hidden_layers; ++i) {
      const std::string p = vit + "encoder.layer." + std::to_string(i) + ".";
      w->layers.push_back({get(p + "layernorm_before.weight", {E}), get(p + "layernorm_before.bias", {E}),
                           get(p + "attention.attention.query.weight", {E, E}), get(p + "attention.attention.query.bias", {E}),
                           get(p + "attention.attention.key.weight", {E, E}), get(p + "attention.attention.key.bias", {E}),
                           get(p + "attention.attention.value.weight", {E, E}), get(p + "attention.attention.value.bias", {E}),
                           get(p + "attention.output.dense.weight", {E, E}), get(p + "attention.output.dense.bias", {E}),
                           get(p + "layernorm_after.weight", {E}), get(p + "layernorm_after.bias", {E}),
                           get(p + "intermediate.dense.weight", {I, E}), get(p + "intermediate.dense.bias", {I}),
                           get(p + "output.dense.weight", {E, I}), get(p + "output.dense.bias", {E})});
    }
    return ViT(std::move(w), device);
  }

  const ViTConfig& config() const { return w_->config; }
  Device device() const { return device_; }

  // kiln::compile<Policies...>(model) calls this.
  template <class... Policies>
  CompiledViT<T, Policies...> compiled() const {
    return CompiledViT<T, Policies...>(w_, device_);
  }

 private:
  ViT(std::shared_ptr<const Weights> w, Device device) : w_(std::move(w)), device_(device) {}
  std::shared_ptr<const Weights> w_;
  Device device_;
};

// ViT compiled with Policies: three programs sharing the model's weights.
template <class T, class... Policies>
class CompiledViT {
  using G = ViTGraph<T>;
  using Logits = typename G::Logits;
  using Weights = typename ViT<T>::Weights;

 public:
  CompiledViT(std::shared_ptr<const typename ViT<T>::Weights> w, Device device)
      : w_(std::move(w)),
        device_(device),
        embed_(compile<Policies...>(G::embed(w_->config.patch_size))),
        layer_(compile<Policies...>(G::layer(w_->config.num_attention_heads, w_->config.layer_norm_eps))),
        head_(compile<Policies...>(G::head(w_->config.layer_norm_eps))) {}

  // Logits [batch, num_labels] for pixel_values [batch, num_channels, image_size, image_size]
  // on the model's device; float for a 16-bit model, else T. Another image size is a
  // ShapeError before any kernel runs. With CUDA graphs (ReduceOverhead, MaxAutotune) on a
  // CUDA device, the whole forward is one graph per batch size (models/model_graph.hpp).
  Tensor<Logits> operator()(const Tensor<T>& pixel_values) {
    const auto& c = w_->config;
    const auto& s = pixel_values.shape();
    const auto z = [](long v) { return static_cast<std::size_t>(v); };
    if (s.rank() != 4 || s[1] != z(c.num_channels) || s[2] != z(c.image_size) || s[3] != z(c.image_size))
      throw ShapeError("ViT: pixel_values must be [batch, " + std::to_string(c.num_channels) + ", " +
                       std::to_string(c.image_size) + ", " + std::to_string(c.image_size) + "], not " + s.str());
    if constexpr (model_graphs<Policies...>)
      if (pixel_values.is_cuda() && !profiling_) return this->graphed(pixel_values);
    Tensor<T> h = embed(embed_, pixel_values);
    for (const auto& l : w_->layers) h = layer(layer_, l, h);
    return head(head_, h);
  }

  // The model's CUDA graphs: how many were captured, and how many calls replayed one.
  long graph_captures() const { return graphs_.captures(); }
  long graph_replays() const { return graphs_.replays(); }

  const ViTConfig& config() const { return w_->config; }

  // Per-kernel timing of the three programs (Compiled::profile): explain() then shows each
  // kernel's mean time per call. While on, a forward runs its programs one by one, not as
  // one CUDA graph, so that each kernel can be timed.
  void profile(bool on = true) {
    profiling_ = on;
    embed_.profile(on), layer_.profile(on), head_.profile(on);
  }
  std::string explain() const {
    return "embeddings:\n" + embed_.explain() + "\nlayer (run once per layer):\n" + layer_.explain() + "\nhead:\n" +
           head_.explain();
  }

 private:
  // Each program called through f: the compiled program, or into(program, out).
  template <class F>
  auto embed(F&& f, const Tensor<T>& pixels) {
    const Weights& w = *w_;
    return f(G::pixels = pixels, G::patch_w = w.patch_w, G::patch_b = w.patch_b, G::cls = w.cls, G::pos = w.pos);
  }
  template <class F>
  static auto layer(F&& f, const ViTLayer<T>& l, const Tensor<T>& h) {
    return f(G::h = h, G::ln1_w = l.ln1_w, G::ln1_b = l.ln1_b, G::q_w = l.q_w, G::q_b = l.q_b, G::k_w = l.k_w,
             G::k_b = l.k_b, G::v_w = l.v_w, G::v_b = l.v_b, G::o_w = l.o_w, G::o_b = l.o_b, G::ln2_w = l.ln2_w,
             G::ln2_b = l.ln2_b, G::i_w = l.i_w, G::i_b = l.i_b, G::out_w = l.out_w, G::out_b = l.out_b);
  }
  template <class F>
  auto head(F&& f, const Tensor<T>& h) {
    const Weights& w = *w_;
    return f(G::h = h, G::lnf_w = w.lnf_w, G::lnf_b = w.lnf_b, G::cls_w = w.cls_w, G::cls_b = w.cls_b);
  }

  // One batch size's buffers and graph: the images, the residual stream (two buffers, each
  // layer reading one and writing the other) and the logits.
  struct Graphed {
    Tensor<T> pixels, h[2];
    Tensor<Logits> logits;
#if KILN_WITH_CUDA
    ForwardGraph graph;
    long captures() const { return graph.captures(); }
    long replays() const { return graph.replays(); }
#endif
  };
  Tensor<Logits> graphed(const Tensor<T>& pixel_values) {
#if KILN_WITH_CUDA
    const auto& c = w_->config;
    const std::size_t B = pixel_values.shape()[0];
    Graphed& g = graphs_.find(pixel_values.shape(), [&] {
      auto n = std::make_unique<Graphed>();
      const Shape hs{B, static_cast<std::size_t>(c.patches() + 1), static_cast<std::size_t>(c.hidden_size)};
      n->pixels = Tensor<T>(pixel_values.shape(), device_);
      n->h[0] = Tensor<T>(hs, device_);
      n->h[1] = Tensor<T>(hs, device_);
      n->logits = Tensor<Logits>(Shape{B, static_cast<std::size_t>(c.num_labels)}, device_);
      return n;
    });
    g.pixels.copy_from(pixel_values);
    g.graph.run(
        [&] {
          embed(into(embed_, g.h[0]), g.pixels);
          const std::size_t n = w_->layers.size();
          for (std::size_t i = 0; i < n; ++i) layer(into(layer_, g.h[(i + 1) % 2]), w_->layers[i], g.h[i % 2]);
          head(into(head_, g.logits), g.h[n % 2]);
        },
        [&] { return embed_.plans_dropped() + layer_.plans_dropped() + head_.plans_dropped(); });
    return Tensor<Logits>(g.logits);  // a copy, queued after the graph
#else
    return Tensor<Logits>(pixel_values.shape());  // not reached: model_graphs is false without CUDA
#endif
  }

  std::shared_ptr<const Weights> w_;
  Device device_;
  GraphedShapes<Shape, Graphed> graphs_;
  bool profiling_ = false;
  decltype(compile<Policies...>(G::embed(1))) embed_;
  decltype(compile<Policies...>(G::layer(1, 0.0))) layer_;
  decltype(compile<Policies...>(G::head(0.0))) head_;
};

}  // namespace kiln::models

namespace kiln {
inline namespace KILN_BACKEND_NS {
// kiln::compile<Policies...>(vit): the model compiled as a whole.
template <class... Policies, class T>
auto compile(const models::ViT<T>& model) {
  return model.template compiled<Policies...>();
}
}  // inline namespace KILN_BACKEND_NS
}  // namespace kiln
