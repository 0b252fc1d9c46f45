// generate()'s sampling (models/sampling.hpp): the draws follow the distribution that
// temperature, top-k and top-p leave, measured over many draws against float64 probabilities
// computed here from the definitions; bad settings and NaN logits are errors.
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <vector>

#include "kiln/models/sampling.hpp"

namespace {
using kiln::models::Sampling;
using kiln::models::sample_token;
using kiln::models::sampling_uniform;

constexpr int kDraws = 200000;

// Frequency of each token over kDraws draws (uniform numbers of steps 0.. of sequence 3).
std::map<long, double> frequencies(const std::vector<float>& logits, const Sampling& s) {
  std::map<long, double> f;
  for (int i = 0; i < kDraws; ++i)
    f[sample_token(logits.data(), logits.size(), s, sampling_uniform(s.seed, static_cast<std::uint64_t>(i), 3), "test")] += 1.0 / kDraws;
  return f;
}

// Each frequency within 5 standard deviations of its probability, and no token outside `want`.
void matches(const std::map<long, double>& got, const std::map<long, double>& want) {
  for (const auto& [token, f] : got) {
    INFO("token " << token);
    CHECK(want.count(token) == 1);
  }
  for (const auto& [token, p] : want) {
    INFO("token " << token << ": probability " << p);
    const double f = got.count(token) ? got.at(token) : 0.0;
    CHECK(std::abs(f - p) <= 5 * std::sqrt(p * (1 - p) / kDraws) + 1e-9);  // 1e-9: the sum of kDraws terms
  }
}

// softmax(l / t) over the tokens in `keep`.
std::map<long, double> softmax(const std::vector<float>& l, double t, const std::vector<long>& keep) {
  double total = 0;
  for (long i : keep) total += std::exp(static_cast<double>(l[static_cast<std::size_t>(i)]) / t);
  std::map<long, double> p;
  for (long i : keep) p[i] = std::exp(static_cast<double>(l[static_cast<std::size_t>(i)]) / t) / total;
  return p;
}
}  // namespace

TEST_CASE("sampling's uniform numbers are in [0, 1), spread, and a function of seed, step and sequence") {
  double sum = 0, low = 1, high = 0;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    const double u = sampling_uniform(7, i, 0);
    sum += u, low = std::min(low, u), high = std::max(high, u);
  }
  CHECK(low >= 0);
  CHECK(high < 1);
  CHECK(sum / 100000 == doctest::Approx(0.5).epsilon(0.01));
  CHECK(sampling_uniform(7, 3, 1) == sampling_uniform(7, 3, 1));
  CHECK(sampling_uniform(7, 3, 1) != sampling_uniform(7, 3, 2));
  CHECK(sampling_uniform(7, 3, 1) != sampling_uniform(7, 4, 1));
  CHECK(sampling_uniform(7, 3, 1) != sampling_uniform(8, 3, 1));
}

TEST_CASE("sampling draws from softmax(logits / temperature)") {
  const std::vector<float> l{1.0f, -0.5f, 2.0f, 0.25f, 0.0f, -2.0f};
  for (double t : {1.0, 0.7, 3.0}) {
    INFO("temperature " << t);
    matches(frequencies(l, {.temperature = t, .top_k = 0, .top_p = 1.0, .seed = 1}), softmax(l, t, {0, 1, 2, 3, 4, 5}));
  }
}

TEST_CASE("top-k keeps the k largest logits, and every tie with the k-th, as HF") {
  const std::vector<float> l{1.0f, -0.5f, 2.0f, 0.25f, 0.0f, -2.0f};
  matches(frequencies(l, {.temperature = 1.0, .top_k = 2, .top_p = 1.0, .seed = 2}), softmax(l, 1.0, {2, 0}));
  const std::vector<float> tied{1.0f, 3.0f, 0.5f, 3.0f};
  matches(frequencies(tied, {.temperature = 1.0, .top_k = 1, .top_p = 1.0, .seed = 3}), softmax(tied, 1.0, {1, 3}));
  // k at least the vocabulary: no filtering.
  matches(frequencies(tied, {.temperature = 1.0, .top_k = 9, .top_p = 1.0, .seed = 3}), softmax(tied, 1.0, {0, 1, 2, 3}));
}

TEST_CASE("top-p removes the smallest tokens whose mass is at most 1 - top_p, as HF") {
  // Probabilities 0.5, 0.3, 0.15, 0.05: ascending sums 0.05, 0.2, 0.5, 1. With top_p 0.75 the
  // two smallest go (0.05 and 0.2 are at most 0.25); with top_p 0.9, only the smallest.
  const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  matches(frequencies(l, {.temperature = 1.0, .top_k = 0, .top_p = 0.75, .seed = 4}), softmax(l, 1.0, {0, 1}));
  matches(frequencies(l, {.temperature = 1.0, .top_k = 0, .top_p = 0.9, .seed = 4}), softmax(l, 1.0, {0, 1, 2}));
  // The largest always stays.
  matches(frequencies(l, {.temperature = 1.0, .top_k = 0, .top_p = 0.01, .seed = 4}), {{0, 1.0}});
  // After top-k: top_k 3 leaves 0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95; top_p 0.8 then drops 0.158.
  matches(frequencies(l, {.temperature = 1.0, .top_k = 3, .top_p = 0.8, .seed = 4}), softmax(l, 1.0, {0, 1}));
}

TEST_CASE("sampling refuses a bad temperature, top_k or top_p, and NaN logits") {
  using kiln::models::check_sampling;
  CHECK_THROWS_WITH_AS(check_sampling({.temperature = 0}, "GPT-2 generate"),
                       "GPT-2 generate: temperature must be positive and finite, not 0.000000", kiln::ValueError);
  CHECK_THROWS_AS(check_sampling({.temperature = std::nan("")}, "g"), kiln::ValueError);
  CHECK_THROWS_AS(check_sampling({.temperature = INFINITY}, "g"), kiln::ValueError);
  CHECK_THROWS_WITH_AS(check_sampling({.top_k = -1}, "g"), "g: top_k must be 0 (off) or more, not -1", kiln::ValueError);
  CHECK_THROWS_WITH_AS(check_sampling({.top_p = 0}, "g"), doctest::Contains("top_p must be in (0, 1]"), kiln::ValueError);
  CHECK_THROWS_AS(check_sampling({.top_p = 1.5}, "g"), kiln::ValueError);
  CHECK_NOTHROW(check_sampling({}, "g"));
  const std::vector<float> l{1.0f, std::nanf(""), 0.0f};
  CHECK_THROWS_WITH_AS(sample_token(l.data(), l.size(), Sampling{}, 0.5, "GPT-2 generate"),
                       "GPT-2 generate: a NaN logit (token 1) cannot be sampled from", kiln::ValueError);
}
