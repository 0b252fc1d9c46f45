// Llama and Gemma loaded from Hugging Face checkpoints and compiled, against what transformers
// computes. The fixtures (tests/data/make_model_fixtures.py, transformers 4.40.2, torch 1.13;
// model_cases.hpp) have 2 layers, hidden size 64 and vocabulary 96:
//   llama_tiny: LlamaForCausalLM, 4 query heads and 2 key/value heads (grouped-query), rope_theta
//     500, rms_norm_eps 1e-5, an untied head;
//   gemma_tiny: GemmaForCausalLM, 4 query heads and 1 key/value head, head_dim 32 (not 64 / 4),
//     the tanh GELU, a tied head.
// transformers computes the rotary tables and the RMS norms in float even in a float64 model,
// so kiln's float64 logits (tables and norms in double) differ from its by about float rounding.
#include "kiln/models/llama.hpp"
#include "model_cases.hpp"

using model_cases::fixture;
using model_cases::Reference;

namespace {
template <template <class> class M, class T, class... Policies>
double error_of(const std::string& name) {
  return model_cases::error_of<M<T>, Policies...>(fixture(name), model_cases::reference(fixture(name), 96));
}
}  // namespace

// Each model type compiled is seconds of build time, so the modes are GPT-2's to cover
// (models_gpt2.cpp); here, the element types and both entry points, each on both families.
DEVICE_CASE("Llama and Gemma from Hugging Face checkpoints give HF's logits and tokens", {
  using kiln::models::Gemma;
  using kiln::models::Llama;
  const Reference llama = model_cases::reference(fixture("llama_tiny"), 96);
  const Reference gemma = model_cases::reference(fixture("gemma_tiny"), 96);
  // Relative to the largest logit. Measured on the CPU: Llama float 7.6e-7, bf16 2.1e-2; Gemma
  // float 5.6e-7, bf16 2.2e-2.
  CHECK(model_cases::error_of<Llama<float>>(fixture("llama_tiny"), llama) < 4e-6);
  CHECK(model_cases::error_of<Llama<float>, kiln::ReduceOverhead, kiln::FullGraph>(fixture("llama_tiny"), llama) < 4e-6);
  CHECK(model_cases::error_of<Llama<kiln::bf16>>(fixture("llama_tiny"), llama) < 6e-2);
  CHECK(model_cases::error_of<Gemma<float>>(fixture("gemma_tiny"), gemma) < 4e-6);
  CHECK(model_cases::error_of<Gemma<kiln::bf16>>(fixture("gemma_tiny"), gemma) < 6e-2);
  // Greedy generate with the static KV cache.
  model_cases::generates_as_hf<Llama<float>>(fixture("llama_tiny"), llama);
  model_cases::generates_as_hf<Llama<float>, kiln::ReduceOverhead, kiln::FullGraph>(fixture("llama_tiny"), llama);
  model_cases::generates_as_hf<Gemma<float>>(fixture("gemma_tiny"), gemma);
  // The second llama_tiny sequence produces the end-of-sequence token (2) first: transformers
  // pads it with 0 from then on, and so must kiln (checked above). Without one, decoding goes
  // on, through the cache, as the forward call without a cache would.
  REQUIRE(llama.generated.at({1, 11}) == 2);
  model_cases::cache_agrees_with_forward<Llama<float>>(fixture("llama_tiny"), llama);
  model_cases::cache_agrees_with_forward<Gemma<float>>(fixture("gemma_tiny"), gemma);
  // Under graphs the rotary rows of each position are staged, as GPT-2's position ids are.
  model_cases::graphs_replay<Llama<float>>(fixture("llama_tiny"), llama);
  // A left-padded batch: each sequence's rotary positions count from its first token.
  model_cases::padded_batch<Llama<float>>(fixture("llama_tiny"), 4e-6);
  model_cases::padded_batch<Llama<float>, kiln::ReduceOverhead, kiln::FullGraph>(fixture("llama_tiny"), 4e-6);
  model_cases::padded_batch<Gemma<float>>(fixture("gemma_tiny"), 4e-6);
})

TEST_CASE("Llama and Gemma in float64 agree with HF to its float rotary tables and norms") {
  // Measured 3.0e-7 for both: float rounding of the tables and norms, not of kiln's maths.
  CHECK(error_of<kiln::models::Llama, double>("llama_tiny") < 1.5e-6);
  CHECK(error_of<kiln::models::Gemma, double>("gemma_tiny") < 1.5e-6);
}

TEST_CASE("Llama's and Gemma's configurations: HF's defaults, and what kiln refuses") {
  const auto llama = kiln::models::Llama<float>::from_pretrained(fixture("llama_tiny"));
  CHECK(llama.config().num_key_value_heads == 2);
  CHECK(llama.config().head_dim() == 16);  // hidden_size / heads: Llama's config has no head_dim
  CHECK(!llama.config().tie_word_embeddings);
  const auto gemma = kiln::models::Gemma<float>::from_pretrained(fixture("gemma_tiny"));
  CHECK(gemma.config().head_dim() == 32);
  CHECK(gemma.config().tie_word_embeddings);

  const std::string dir = fixture("llama_tiny");
  auto refused = [](const std::string& d) { return kiln::models::Llama<float>::from_pretrained(d); };
  using model_cases::edited_copy;
  using model_cases::replace;
  CHECK_THROWS_WITH_AS(refused(edited_copy(dir, "kv", [](auto s) { return replace(s, "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"); })),
                       doctest::Contains("\"num_attention_heads\" (4) is not a multiple of \"num_key_value_heads\" (3)"),
                       kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(edited_copy(dir, "act", [](auto s) { return replace(s, "\"silu\"", "\"relu\""); })),
                       doctest::Contains("the activation is \"relu\""), kiln::ValueError);
  CHECK_THROWS_WITH_AS(refused(edited_copy(dir, "scaling", [](auto s) {
                         return replace(s, "\"rope_scaling\": null", "\"rope_scaling\": {\"type\": \"linear\", \"factor\": 2.0}");
                       })),
                       doctest::Contains("\"rope_scaling\" is set"), kiln::ValueError);
  // An untied head that the checkpoint lacks (Gemma's is tied, so it saves none): a FileError
  // naming it.
  CHECK_THROWS_WITH_AS(kiln::models::Gemma<float>::from_pretrained(edited_copy(fixture("gemma_tiny"), "untied", [](auto s) {
                         return replace(s, "\"head_dim\": 32,", "\"head_dim\": 32, \"tie_word_embeddings\": false,");
                       })),
                       doctest::Contains("no tensor named \"lm_head.weight\""), kiln::FileError);
}
