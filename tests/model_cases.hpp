// What the tests of kiln::models share: a fixture written by tests/data/make_model_fixtures.py
// (a Hugging Face model with random weights in tests/data/<name>, and reference.safetensors
// with input_ids [2, 11], transformers' float64 logits for them and the 8 tokens its greedy
// generate appends), and checks of a kiln model against it.
#pragma once
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "kiln/io/safetensors.hpp"
#include "kiln/models/decoder.hpp"
#include "on_device.hpp"

namespace model_cases {
namespace fs = std::filesystem;

inline std::string fixture(const std::string& name) { return KILN_TEST_DATA_DIR "/" + name; }

struct Reference {
  kiln::Tensor<kiln::i64> ids, generated;
  kiln::Tensor<double> logits;
};
inline Reference reference(const std::string& dir, std::size_t vocab) {
  kiln::io::SafetensorsFile f(dir + "/reference.safetensors");
  auto integers = [&](const std::string& name) {
    const auto v = f.get_integers(name);
    return kiln::from_vector(std::vector<kiln::i64>(v.begin(), v.end()), f.info(name).shape);
  };
  Reference r{integers("input_ids"), integers("generated"), f.get<double>("logits")};
  REQUIRE(r.ids.shape() == kiln::Shape{2, 11});
  REQUIRE(r.generated.shape() == kiln::Shape{2, 19});
  REQUIRE(r.logits.shape() == kiln::Shape{2, 11, vocab});
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

// Model M (kiln::models::GPT2<float>, say) loaded from dir and compiled with Policies: the
// error of its logits; a second call must give the same.
template <class M, class... Policies>
double error_of(const std::string& dir, const Reference& r) {
  const auto lm = M::from_pretrained(dir, cases::device());
  auto fast = kiln::compile<Policies...>(lm);
  const auto ids = r.ids.to(cases::device());
  const double first = relative_error(fast(ids), r.logits);
  CHECK(relative_error(fast(ids), r.logits) == first);
  return first;
}

// Greedy generate picks transformers' 8 tokens (the fixture's generate was given
// pad_token_id 0, and its configuration's eos_token_id); with none asked for, the prompt comes
// back.
template <class M, class... Policies>
void generates_as_hf(const std::string& dir, const Reference& r) {
  const auto lm = M::from_pretrained(dir, cases::device());
  auto fast = kiln::compile<Policies...>(lm);
  const auto got = fast.generate(r.ids.to(cases::device()), {.max_new_tokens = 8, .pad_token_id = 0}).cpu();
  REQUIRE(got.shape() == r.generated.shape());
  for (std::size_t i = 0; i < got.numel(); ++i) {
    INFO("token " << i % 19 << " of sequence " << i / 19);
    CHECK(got[i] == r.generated[i]);
  }
  CHECK(fast.generate(r.ids.to(cases::device()), {.max_new_tokens = 0}).shape() == kiln::Shape{2, 11});
}

// Decoding through the KV cache agrees with the forward call without one: every token
// generate picks (no end-of-sequence token, so none is padded) is the argmax of the forward
// logits of the sequence before it.
template <class M, class... Policies>
void cache_agrees_with_forward(const std::string& dir, const Reference& r) {
  const auto lm = M::from_pretrained(dir, cases::device());
  auto fast = kiln::compile<Policies...>(lm);
  const auto out = fast.generate(r.ids.to(cases::device()), {.max_new_tokens = 8, .eos_token_id = std::vector<long>{}, .pad_token_id = {}}).cpu();
  REQUIRE(out.shape() == kiln::Shape{2, 19});
  std::vector<kiln::i64> prefix;
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 0; i < 18; ++i) prefix.push_back(out.at({b, i}));
  const auto logits = fast(kiln::from_vector(prefix, kiln::Shape{2, 18}, cases::device())).cpu();
  const std::size_t V = logits.shape()[2];
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t i = 10; i < 18; ++i) {
      std::size_t best = 0;
      for (std::size_t v = 1; v < V; ++v)
        if (logits.at({b, i, v}) > logits.at({b, i, best})) best = v;
      INFO("sequence " << b << ", position " << i + 1);
      CHECK(out.at({b, i + 1}) == static_cast<kiln::i64>(best));
    }
}

// With CUDA graphs (ReduceOverhead) on the GPU a decoder's forward of one shape is one graph:
// the first call runs the programs directly, the second captures them, later calls replay, and
// all give the same bits. generate()'s prompt and its decode steps are a graph each, the steps'
// one replayed at every position, and generate gives the tokens of the compiled model without
// graphs. On the CPU there are no graphs and the same calls agree.
template <class M>
void graphs_replay(const std::string& dir, const Reference& r) {
  const auto lm = M::from_pretrained(dir, cases::device());
  auto fast = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(lm);
  auto plain = kiln::compile(lm);
  const auto ids = r.ids.to(cases::device());
  const auto first = fast(ids).cpu();
  for (int i = 0; i < 3; ++i) {
    const auto again = fast(ids).cpu();
    REQUIRE(again.shape() == first.shape());
    CHECK(std::memcmp(again.data(), first.data(), first.numel() * sizeof(float)) == 0);
  }
  const bool gpu = cases::device().is_cuda();
  CHECK(fast.graph_captures() == (gpu ? 1 : 0));
  CHECK(fast.graph_replays() == (gpu ? 2 : 0));
  const kiln::models::GenerationConfig gen{.max_new_tokens = 8, .eos_token_id = std::vector<long>{}, .pad_token_id = {}};
  const auto want = plain.generate(ids, gen).cpu();
  for (int i = 0; i < 2; ++i) {
    const auto got = fast.generate(ids, gen).cpu();
    REQUIRE(got.shape() == want.shape());
    for (std::size_t k = 0; k < got.numel(); ++k) {
      INFO("generate " << i << ", token " << k % 19 << " of sequence " << k / 19);
      CHECK(got[k] == want[k]);
    }
  }
  // The first generate: the prompt and the first step run directly, the second step is
  // captured and the other 5 replay it; the second: the prompt is captured, 7 steps replay.
  CHECK(fast.graph_captures() == (gpu ? 1 + 1 + 1 : 0));
  CHECK(fast.graph_replays() == (gpu ? 2 + 5 + 7 : 0));
  // Profiling runs the programs one by one (no graph replayed), with the same logits, and
  // explain() shows each kernel's time.
  fast.profile();
  const auto profiled = fast(ids).cpu();
  CHECK(std::memcmp(profiled.data(), first.data(), first.numel() * sizeof(float)) == 0);
  CHECK(fast.graph_replays() == (gpu ? 2 + 5 + 7 : 0));
  CHECK(fast.explain().find(" ms per call (") != std::string::npos);
  fast.profile(false);
  (void)fast(ids);
  CHECK(fast.graph_replays() == (gpu ? 2 + 5 + 7 + 1 : 0));
}

// Sampling in generate(): top_k 1 picks the greedy tokens; a seed gives the same tokens again,
// under CUDA graphs too (their own graphs, beside the greedy ones), and other seeds other tokens;
// a bad temperature is a ValueError before any kernel runs.
template <class M>
void samples(const std::string& dir, const Reference& r) {
  const auto lm = M::from_pretrained(dir, cases::device());
  auto plain = kiln::compile(lm);
  auto graphed = kiln::compile<kiln::ReduceOverhead, kiln::FullGraph>(lm);
  const auto ids = r.ids.to(cases::device());
  using G = kiln::models::GenerationConfig;
  const G greedy{.max_new_tokens = 8, .eos_token_id = std::vector<long>{}, .pad_token_id = {}};
  G top1 = greedy;
  top1.do_sample = true, top1.top_k = 1, top1.seed = 5;
  const auto want = plain.generate(ids, greedy).cpu();
  const auto got = plain.generate(ids, top1).cpu();
  REQUIRE(got.shape() == want.shape());
  CHECK(std::memcmp(got.data(), want.data(), want.numel() * sizeof(kiln::i64)) == 0);
  G hot = greedy;  // a flat distribution over the tiny vocabulary: the draws decide
  hot.do_sample = true, hot.temperature = 4.0, hot.top_k = 0, hot.top_p = 0.95, hot.seed = 11;
  const auto a = plain.generate(ids, hot).cpu();
  for (int i = 0; i < 2; ++i) {
    const auto b = graphed.generate(ids, hot).cpu();
    REQUIRE(b.shape() == a.shape());
    CHECK(std::memcmp(a.data(), b.data(), a.numel() * sizeof(kiln::i64)) == 0);
  }
  std::size_t differ = 0;
  for (std::uint64_t seed : {12, 13, 14}) {
    G other = hot;
    other.seed = seed;
    const auto c = plain.generate(ids, other).cpu();
    differ += std::memcmp(a.data(), c.data(), a.numel() * sizeof(kiln::i64)) != 0;
  }
  CHECK(differ == 3);
  G bad = hot;
  bad.temperature = 0;
  CHECK_THROWS_WITH_AS(plain.generate(ids, bad), doctest::Contains("temperature must be positive"), kiln::ValueError);
}

// A left-padded batch (reference_padded.safetensors: prompts of 11, 6 and 3 tokens after pad id
// 0, with HF's attention_mask): the logits of model(input_ids, attention_mask) are HF's at the
// real positions, generate(input_ids, attention_mask) appends HF's 8 tokens, and each sequence's
// new tokens are those it gets alone, without padding. Masks kiln does not take are errors.
template <class M, class... Policies>
void padded_batch(const std::string& dir, double bound) {
  kiln::io::SafetensorsFile f(dir + "/reference_padded.safetensors");
  auto integers = [&](const std::string& name) {
    const auto v = f.get_integers(name);
    return kiln::from_vector(std::vector<kiln::i64>(v.begin(), v.end()), f.info(name).shape);
  };
  const auto ids = integers("input_ids"), mask = integers("attention_mask"), generated = integers("generated");
  const auto want = f.get<double>("logits");
  REQUIRE(ids.shape() == kiln::Shape{3, 11});
  REQUIRE(generated.shape() == kiln::Shape{3, 19});
  const std::vector<std::size_t> pads{0, 5, 8};
  for (std::size_t b = 0; b < 3; ++b) REQUIRE(mask.at({b, pads[b]}) == 1);
  const auto lm = M::from_pretrained(dir, cases::device());
  auto fast = kiln::compile<Policies...>(lm);
  const auto dev = cases::device();
  for (int call = 0; call < 2; ++call) {  // twice: under graphs, the second call is the capture
    const auto logits = fast(ids.to(dev), mask.to(dev)).cpu();
    REQUIRE(logits.shape() == want.shape());
    const std::size_t V = want.shape()[2];
    double err = 0, scale = 0;
    for (std::size_t b = 0; b < 3; ++b)
      for (std::size_t i = pads[b]; i < 11; ++i)
        for (std::size_t v = 0; v < V; ++v) {
          err = std::max(err, std::abs(static_cast<double>(logits.at({b, i, v})) - want.at({b, i, v})));
          scale = std::max(scale, std::abs(want.at({b, i, v})));
        }
    REQUIRE(scale > 0.1);
    CHECK(err / scale < bound);
  }
  const kiln::models::GenerationConfig gen{.max_new_tokens = 8, .pad_token_id = 0};
  for (int call = 0; call < 2; ++call) {
    const auto got = fast.generate(ids.to(dev), mask.to(dev), gen).cpu();
    REQUIRE(got.shape() == generated.shape());
    for (std::size_t i = 0; i < got.numel(); ++i) {
      INFO("call " << call << ", token " << i % 19 << " of sequence " << i / 19);
      CHECK(got[i] == generated[i]);
    }
  }
  for (std::size_t b = 0; b < 3; ++b) {
    const std::size_t n = 11 - pads[b];
    std::vector<kiln::i64> alone(ids.data() + b * 11 + pads[b], ids.data() + (b + 1) * 11);
    const auto got = fast.generate(kiln::from_vector(alone, kiln::Shape{1, n}, dev), gen).cpu();
    REQUIRE(got.numel() <= n + 8);
    for (std::size_t i = n; i < got.numel(); ++i) {
      INFO("sequence " << b << " alone, new token " << i - n);
      CHECK(got[i] == generated.at({b, 11 + i - n}));
    }
  }
  kiln::Tensor<kiln::i64> right = mask;  // a copy
  right.at({1, 10}) = 0;
  CHECK_THROWS_WITH_AS(fast(ids.to(dev), right.to(dev)),
                       doctest::Contains("attention_mask[1, 10] is 0 after a 1: kiln takes left padding only"), kiln::ValueError);
  kiln::Tensor<kiln::i64> two = mask;
  two.at({0, 0}) = 2;
  CHECK_THROWS_WITH_AS(fast.generate(ids.to(dev), two.to(dev), gen),
                       doctest::Contains("attention_mask[0, 0] is 2; a mask holds 0 (padding) and 1"), kiln::ValueError);
  CHECK_THROWS_WITH_AS(fast(ids.to(dev), kiln::ones<kiln::i64>({3, 10}, dev)),
                       doctest::Contains("attention_mask [3, 10] must have input_ids' shape [3, 11]"), kiln::ShapeError);
}

// A copy of a fixture's directory with config.json edited by `edit` (a JSON text transform).
inline std::string edited_copy(const std::string& dir, const std::string& name,
                               const std::function<std::string(std::string)>& edit) {
  const fs::path out = fs::temp_directory_path() / ("kiln_model_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(out);
  fs::copy_file(dir + "/model.safetensors", out / "model.safetensors", fs::copy_options::overwrite_existing);
  std::ifstream in(dir + "/config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(out / "config.json") << edit(text);
  return out.string();
}
inline std::string replace(std::string s, const std::string& from, const std::string& to) {
  const auto at = s.find(from);
  REQUIRE(at != std::string::npos);
  return s.replace(at, from.size(), to);
}

}  // namespace model_cases
