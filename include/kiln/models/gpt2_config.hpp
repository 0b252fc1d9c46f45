// kiln: GPT-2's configuration, read from a Hugging Face config.json (kiln/models/gpt2.hpp is
// the model). Apart from the model so that the libFuzzer target of the reader
// (tests/fuzz/config_fuzzer.cpp) builds without kiln's compiler.
#pragma once
#include <string>

#include "kiln/models/config.hpp"

namespace kiln::models {

// GPT-2's configuration: Hugging Face's GPT2Config keys and defaults.
struct GPT2Config : SpecialTokens {
  long vocab_size = 50257, n_positions = 1024, n_embd = 768, n_layer = 12, n_head = 12, n_inner = 3072;
  double layer_norm_epsilon = 1e-5;

  static GPT2Config from(const JsonConfig& c) {
    GPT2Config g;
    g.read(c);
    constexpr long kMaxExtent = long{1} << 31;
    g.vocab_size = c.integer("vocab_size", g.vocab_size, 1, kMaxExtent);
    g.n_positions = c.integer("n_positions", g.n_positions, 1, kMaxExtent);
    g.n_embd = c.integer("n_embd", g.n_embd, 1, kMaxExtent);
    g.n_layer = c.integer("n_layer", g.n_layer, 0, 1 << 16);
    g.n_head = c.integer("n_head", g.n_head, 1, kMaxExtent);
    g.n_inner = c.integer("n_inner", 4 * g.n_embd, 1, kMaxExtent);
    g.layer_norm_epsilon = c.number("layer_norm_epsilon", g.layer_norm_epsilon, 0, 1);
    if (g.n_embd % g.n_head != 0)
      c.fail("\"n_embd\" (" + std::to_string(g.n_embd) + ") is not a multiple of \"n_head\" (" + std::to_string(g.n_head) + ")");
    const std::string act = c.string("activation_function", "gelu_new");
    if (act != "gelu_new" && act != "gelu_pytorch_tanh" && act != "gelu_fast")
      unsupported(c, "\"activation_function\" is \"" + act + "\"; kiln's GPT-2 has the tanh GELU (gelu_new, gelu_pytorch_tanh, gelu_fast)");
    if (!c.boolean("scale_attn_weights", true)) unsupported(c, "\"scale_attn_weights\" is false");
    if (c.boolean("scale_attn_by_inverse_layer_idx", false)) unsupported(c, "\"scale_attn_by_inverse_layer_idx\" is true");
    if (c.boolean("reorder_and_upcast_attn", false)) unsupported(c, "\"reorder_and_upcast_attn\" is true");
    if (c.boolean("add_cross_attention", false)) unsupported(c, "\"add_cross_attention\" is true");
    return g;
  }
  long hidden() const { return n_embd; }
  long head_dim() const { return n_embd / n_head; }
  long kv_heads() const { return n_head; }
  long max_positions() const { return n_positions; }

 private:
  [[noreturn]] static void unsupported(const JsonConfig& c, const std::string& why) {
    throw ValueError("GPT-2 " + c.what() + ": " + why + ", which is not supported");
  }
};

}  // namespace kiln::models
