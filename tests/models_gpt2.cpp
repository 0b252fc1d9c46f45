// GPT-2 loaded from a Hugging Face checkpoint and compiled, against what transformers computes.
// tests/data/gpt2_tiny was written by tests/data/make_model_fixtures.py (transformers 4.40.2,
// torch 1.13): GPT2LMHeadModel with 2 layers, 4 heads, n_embd 48, vocab 96 (model_cases.hpp).
#include <nlohmann/json.hpp>

#include "kiln/models/gpt2.hpp"
#include "kiln/text/tokenizer.hpp"
#include "model_cases.hpp"

using model_cases::fixture;
using model_cases::Reference;
using model_cases::replace;
namespace fs = std::filesystem;
namespace {
const std::string kTiny = fixture("gpt2_tiny");
Reference reference() { return model_cases::reference(kTiny, 96); }
template <class T, class... Policies>
double error_of(const Reference& r) {
  return model_cases::error_of<kiln::models::GPT2<T>, Policies...>(kTiny, r);
}
template <class T, class... Policies>
void generates_as_hf(const Reference& r) {
  model_cases::generates_as_hf<kiln::models::GPT2<T>, Policies...>(kTiny, r);
}
std::string edited_copy(const std::string& name, const std::function<std::string(std::string)>& edit) {
  return model_cases::edited_copy(kTiny, name, edit);
}
}  // namespace

DEVICE_CASE("GPT-2 from a Hugging Face checkpoint gives HF's logits, in every mode", {
  const Reference r = reference();
  // Relative to the largest logit. Measured on the CPU: float 4.4e-7 (7.6e-7 autotuned), bf16
  // 2.4e-2, f16 1.7e-3; on an H100, float 2.2e-6 (2.3e-6 autotuned: cuBLASLt's and the fused
  // kernels' summation orders). The bounds leave 2x or more, the float ones far below what a
  // wrong op gives (> 1e-2).
  const double float_bound = cases::device().is_cuda() ? 5e-6 : 2e-6;
  CHECK(error_of<float>(r) < float_bound);
  CHECK(error_of<float, kiln::ReduceOverhead, kiln::FullGraph>(r) < float_bound);
  CHECK(error_of<float, kiln::MaxAutotune>(r) < float_bound);
  CHECK(error_of<float, kiln::Eager>(r) < float_bound);
  // 16-bit weights and activations, float accumulation.
  CHECK(error_of<kiln::bf16>(r) < 6e-2);
  CHECK(error_of<kiln::f16>(r) < 6e-3);
})

DEVICE_CASE("GPT-2's greedy generate with a static KV cache picks HF's tokens", {
  const Reference r = reference();
  generates_as_hf<float>(r);
  generates_as_hf<float, kiln::ReduceOverhead, kiln::FullGraph>(r);
  generates_as_hf<double>(r);
  model_cases::cache_agrees_with_forward<kiln::models::GPT2<float>>(kTiny, r);
  model_cases::graphs_replay<kiln::models::GPT2<float>>(kTiny, r);
})

DEVICE_CASE("GPT-2 on a left-padded batch with an attention mask gives HF's logits and tokens", {
  model_cases::padded_batch<kiln::models::GPT2<float>>(kTiny, 5e-6);
  model_cases::padded_batch<kiln::models::GPT2<float>, kiln::ReduceOverhead, kiln::FullGraph>(kTiny, 5e-6);
})

DEVICE_CASE("GPT-2's generate samples with temperature, top-k, top-p and a seed", {
  model_cases::samples<kiln::models::GPT2<float>>(kTiny, reference());
})

// tests/data/gpt2_text (tests/data/make_tokenizer_fixture.py): a GPT-2 over the byte-level BPE
// vocabulary of tests/data/bpe_tiny, and the text transformers' greedy generate gives after a
// prompt, from its tokenizer to its decode.
template <class... Policies>
void completes_text_as_hf() {
  const std::string dir = fixture("gpt2_text");
  std::ifstream in(dir + "/reference.json");
  const auto ref = nlohmann::json::parse(in);
  const auto want = ref["ids"].get<std::vector<kiln::i64>>();
  const auto tok = kiln::text::Tokenizer::from_pretrained(dir);
  const std::vector<kiln::i64> prompt = tok.encode(ref["prompt"].get<std::string>());
  REQUIRE(prompt.size() < want.size());
  CHECK(std::equal(prompt.begin(), prompt.end(), want.begin()));
  auto fast = kiln::compile<Policies...>(kiln::models::GPT2<float>::from_pretrained(dir, cases::device()));
  const auto ids = kiln::from_vector(prompt, kiln::Shape{1, prompt.size()}, cases::device());
  const auto out = fast.generate(ids, {.max_new_tokens = ref["max_new_tokens"].get<long>()}).cpu();
  const std::vector<kiln::i64> got(out.data(), out.data() + out.numel());
  CHECK(got == want);
  CHECK(tok.decode(got) == ref["text"].get<std::string>());
}

DEVICE_CASE("GPT-2 with its tokenizer completes a prompt as transformers does, text to text", {
  completes_text_as_hf();
  completes_text_as_hf<kiln::ReduceOverhead, kiln::FullGraph>();
})

TEST_CASE("GPT-2 in float64 agrees with Hugging Face's float64 logits to rounding") {
  CHECK(error_of<double>(reference()) < 1e-13);  // measured 1.2e-15
}

TEST_CASE("GPT-2's configuration: HF's defaults, and what kiln refuses") {
  const auto lm = kiln::models::GPT2<float>::from_pretrained(kTiny);
  const auto& c = lm.config();
  CHECK(c.n_embd == 48);
  CHECK(c.n_head == 4);
  CHECK(c.n_layer == 2);
  CHECK(c.n_inner == 192);  // null in the file: 4 n_embd, as HF
  CHECK(c.layer_norm_epsilon == 1e-5);

  using kiln::models::GPT2;
  auto refused = [](const std::string& dir) { return GPT2<float>::from_pretrained(dir); };
  CHECK_THROWS_WITH_AS(refused(edited_copy("heads", [](auto s) { return replace(s, "\"n_head\": 4", "\"n_head\": 5"); })),
                       doctest::Contains("\"n_embd\" (48) is not a multiple of \"n_head\" (5)"), kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(edited_copy("act", [](auto s) { return replace(s, "\"gelu_new\"", "\"relu\""); })),
                       doctest::Contains("\"activation_function\" is \"relu\""), kiln::ValueError);
  CHECK_THROWS_WITH_AS(refused(edited_copy("type", [](auto s) { return replace(s, "\"n_layer\": 2", "\"n_layer\": \"2\""); })),
                       doctest::Contains("\"n_layer\" is \"2\", not an integer"), kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(edited_copy("neg", [](auto s) { return replace(s, "\"n_embd\": 48", "\"n_embd\": -48"); })),
                       doctest::Contains("\"n_embd\" is -48, not in [1,"), kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(edited_copy("json", [](auto s) { return s.substr(0, s.size() / 2); })),
                       doctest::Contains("not valid JSON"), kiln::FileError);
  // A configuration that disagrees with the weights: a ShapeError naming the tensor.
  CHECK_THROWS_WITH_AS(refused(edited_copy("vocab", [](auto s) { return replace(s, "\"vocab_size\": 96", "\"vocab_size\": 97"); })),
                       doctest::Contains("\"transformer.wte.weight\" has shape [96, 48], the configuration gives [97, 48]"),
                       kiln::ShapeError);
  // One more layer than the checkpoint holds: a FileError naming the missing tensor.
  CHECK_THROWS_WITH_AS(refused(edited_copy("layers", [](auto s) { return replace(s, "\"n_layer\": 2", "\"n_layer\": 3"); })),
                       doctest::Contains("no tensor named \"transformer.h.2.ln_1.weight\""), kiln::FileError);
  CHECK_THROWS_WITH_AS(refused(fs::temp_directory_path().string() + "/kiln_no_such_model"),
                       doctest::Contains("cannot open it"), kiln::FileError);
}

TEST_CASE("GPT-2's inputs are checked before any kernel runs") {
  auto fast = kiln::compile(kiln::models::GPT2<float>::from_pretrained(kTiny));
  CHECK_THROWS_WITH_AS(fast(kiln::zeros<kiln::i64>({1, 33})), doctest::Contains("longer than the model's positions (32)"),
                       kiln::ShapeError);
  CHECK_THROWS_AS(fast(kiln::full<kiln::i64>({1, 3}, 96)), kiln::IndexError);  // an id past the vocabulary
  CHECK(fast(kiln::zeros<kiln::i64>({3, 1})).shape() == kiln::Shape{3, 1, 96});
  CHECK_THROWS_WITH_AS(fast.generate(kiln::zeros<kiln::i64>({1, 30}), {.max_new_tokens = 3}),
                       doctest::Contains("30 prompt tokens and 3 new ones need 33 positions, more than the model's (32)"),
                       kiln::ShapeError);
  CHECK_THROWS_AS(fast.generate(kiln::zeros<kiln::i64>({1, 3}), {.max_new_tokens = -1}), kiln::ValueError);
}

TEST_CASE("a model whose checkpoint is sharded (model.safetensors.index.json) loads as the whole one") {
  // gpt2_tiny's tensors split over two shard files with an index, as save_pretrained writes a
  // large model, without the "transformer." prefix (as GPT2Model saves them).
  const fs::path dir = fs::temp_directory_path() / ("kiln_gpt2_sharded_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kTiny + "/config.json", dir / "config.json", fs::copy_options::overwrite_existing);
  kiln::io::SafetensorsFile whole(kTiny + "/model.safetensors");
  std::vector<kiln::io::NamedTensor> shard[2];
  std::string index = "{\"metadata\": {}, \"weight_map\": {";
  for (std::size_t i = 0; i < whole.tensors().size(); ++i) {
    const std::string name = whole.tensors()[i].name, bare = name.substr(std::string("transformer.").size());
    const std::string file = "model-0000" + std::to_string(i % 2 + 1) + "-of-00002.safetensors";
    shard[i % 2].emplace_back(bare, whole.get<float>(name));
    index += (i ? ", \"" : "\"") + bare + "\": \"" + file + "\"";
  }
  index += "}}";
  kiln::io::save_safetensors((dir / "model-00001-of-00002.safetensors").string(), shard[0]);
  kiln::io::save_safetensors((dir / "model-00002-of-00002.safetensors").string(), shard[1]);
  std::ofstream(dir / "model.safetensors.index.json") << index;
  REQUIRE(!fs::exists(dir / "model.safetensors"));

  const auto ids = reference().ids;
  auto sharded = kiln::compile(kiln::models::GPT2<float>::from_pretrained(dir.string()));
  auto single = kiln::compile(kiln::models::GPT2<float>::from_pretrained(kTiny));
  const auto a = sharded(ids), b = single(ids);
  REQUIRE(a.shape() == b.shape());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < a.numel(); ++i) differ += a[i] != b[i];
  CHECK(differ == 0);
  fs::remove_all(dir);
}

TEST_CASE("GPT-2's programs compute each value once, and generate writes its caches in place") {
  auto fast = kiln::compile(kiln::models::GPT2<float>::from_pretrained(kTiny));
  (void)fast.generate(reference().ids, {.max_new_tokens = 2});
  const std::string plan = fast.explain();
  auto count = [&](const std::string& what) {
    std::size_t n = 0;
    for (auto at = plan.find(what); at != std::string::npos; at = plan.find(what, at + 1)) ++n;
    return n;
  };
  // One attention and one QKV projection in each of the two layer programs (a repeated
  // subexpression that is not merged computes them again: 6 projections and 2 attentions).
  CHECK(count("attention -> ") == 2);
  CHECK(count("reads attn.c_attn.bias") == 2);
  CHECK(plan.find("assigned in place, without a copy: k_cache (kernel") != std::string::npos);
}
