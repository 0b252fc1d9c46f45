// GPT-2 loaded from a Hugging Face checkpoint and compiled, against the logits Hugging Face
// computes. tests/data/gpt2_tiny was written by tests/data/make_gpt2_fixture.py (transformers
// 4.40.2, torch 1.13): GPT2LMHeadModel with 2 layers, 4 heads, n_embd 48, vocab 96, random
// weights (biases and layer norms included) saved by save_pretrained, and reference.safetensors
// holding input_ids [2, 11], HF's logits for them computed in float64, and the 8 tokens HF's
// greedy generate (float64, with its KV cache) appends.
#include <doctest/doctest.h>

#include <cstdio>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <fstream>

#include "kiln/models/gpt2.hpp"
#include "on_device.hpp"

namespace {
namespace fs = std::filesystem;
const std::string kTiny = KILN_TEST_DATA_DIR "/gpt2_tiny";

struct Reference {
  kiln::Tensor<kiln::i64> ids, generated;
  kiln::Tensor<double> logits;
};
Reference reference() {
  kiln::io::SafetensorsFile f(kTiny + "/reference.safetensors");
  auto integers = [&](const std::string& name) {
    const auto v = f.get_integers(name);
    return kiln::from_vector(std::vector<kiln::i64>(v.begin(), v.end()), f.info(name).shape);
  };
  Reference r{integers("input_ids"), integers("generated"), f.get<double>("logits")};
  REQUIRE(r.ids.shape() == kiln::Shape{2, 11});
  REQUIRE(r.generated.shape() == kiln::Shape{2, 19});
  REQUIRE(r.logits.shape() == kiln::Shape{2, 11, 96});
  return r;
}

// max |got - want| over max |want|, the logits' scale.
template <class T>
double relative_error(const kiln::Tensor<T>& got_dev, const kiln::Tensor<double>& want) {
  const auto got = got_dev.cpu();
  REQUIRE(got.shape() == want.shape());
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < want.numel(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(want[i]));
  }
  REQUIRE(scale > 0.1);  // the fixture's logits are not near zero: the check means something
  return err / scale;
}

template <class T, class... Policies>
double error_of(const Reference& r) {
  const auto lm = kiln::models::GPT2<T>::from_pretrained(kTiny, cases::device());
  auto fast = kiln::compile<Policies...>(lm);
  const auto ids = r.ids.to(cases::device());
  const double first = relative_error(fast(ids), r.logits);
  CHECK(relative_error(fast(ids), r.logits) == first);  // a second call (a kept plan) gives the same
  return first;
}

// A copy of the fixture's directory with config.json edited by `edit` (a JSON text transform).
std::string edited_copy(const std::string& name, const std::function<std::string(std::string)>& edit) {
  const fs::path dir = fs::temp_directory_path() / ("kiln_gpt2_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(kTiny + "/model.safetensors", dir / "model.safetensors", fs::copy_options::overwrite_existing);
  std::ifstream in(kTiny + "/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "config.json") << edit(text);
  return dir.string();
}
std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}
}  // namespace

DEVICE_CASE("GPT-2 from a Hugging Face checkpoint gives HF's logits, in every mode", {
  const Reference r = reference();
  // Relative to the largest logit. Measured on the CPU: float 3.8e-7 (2.7e-7 autotuned), bf16
  // 1.1e-2, f16 1.2e-3: the bounds leave about 5x, far below what a wrong op gives (> 1e-2 in
  // float).
  CHECK(error_of<float>(r) < 2e-6);
  CHECK(error_of<float, kiln::ReduceOverhead, kiln::FullGraph>(r) < 2e-6);
  CHECK(error_of<float, kiln::MaxAutotune>(r) < 2e-6);
  CHECK(error_of<float, kiln::Eager>(r) < 2e-6);
  // 16-bit weights and activations, float accumulation.
  CHECK(error_of<kiln::bf16>(r) < 5e-2);
  CHECK(error_of<kiln::f16>(r) < 6e-3);
})

template <class T, class... Policies>
void generates_as_hf(const Reference& r) {
  const auto lm = kiln::models::GPT2<T>::from_pretrained(kTiny, cases::device());
  auto fast = kiln::compile<Policies...>(lm);
  const auto got = fast.generate(r.ids.to(cases::device()), {.max_new_tokens = 8}).cpu();
  REQUIRE(got.shape() == r.generated.shape());
  for (std::size_t i = 0; i < got.numel(); ++i) {
    INFO("token " << i % 19 << " of sequence " << i / 19);
    CHECK(got[i] == r.generated[i]);
  }
  // No new tokens: the prompt back.
  CHECK(fast.generate(r.ids.to(cases::device()), {.max_new_tokens = 0}).shape() == kiln::Shape{2, 11});
}

DEVICE_CASE("GPT-2's greedy generate with a static KV cache picks HF's tokens", {
  const Reference r = reference();
  generates_as_hf<float>(r);
  generates_as_hf<float, kiln::ReduceOverhead>(r);
  generates_as_hf<double>(r);
})

TEST_CASE("GPT-2 in float64 agrees with Hugging Face's float64 logits to rounding") {
  CHECK(error_of<double>(reference()) < 1e-13);  // measured 1.1e-15
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
  CHECK_THROWS_WITH_AS(fast(kiln::zeros<kiln::i64>({1, 33})), doctest::Contains("longer than n_positions (32)"),
                       kiln::ShapeError);
  CHECK_THROWS_AS(fast(kiln::full<kiln::i64>({1, 3}, 96)), kiln::IndexError);  // an id past the vocabulary
  CHECK(fast(kiln::zeros<kiln::i64>({3, 1})).shape() == kiln::Shape{3, 1, 96});
  CHECK_THROWS_WITH_AS(fast.generate(kiln::zeros<kiln::i64>({1, 30}), {.max_new_tokens = 3}),
                       doctest::Contains("30 prompt tokens and 3 new ones need 33 positions, more than n_positions (32)"),
                       kiln::ShapeError);
  CHECK_THROWS_AS(fast.generate(kiln::zeros<kiln::i64>({1, 3}), {.max_new_tokens = -1}), kiln::ValueError);
}
