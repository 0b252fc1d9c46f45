// kiln: how generate() chooses a token when it samples (GenerationConfig::do_sample), with HF's
// logits processors in HF's order: temperature, then top-k, then top-p, then a draw from the
// softmax of what is left.
//
// For one row of logits l (the vocabulary):
//   temperature T:  l_i / T;
//   top-k (k > 0):  only the tokens whose logit is at least the k-th largest stay (so ties
//                   with the k-th all stay, as HF's `scores < topk(scores, k)[-1]` removes);
//   top-p (p < 1):  with the staying tokens in ascending order of logit, a token is removed
//                   when the probability of it and every smaller token is at most 1 - p (HF's
//                   TopPLogitsWarper); the largest always stays;
//   draw:           p_i = exp(l_i / T - max) / sum over the staying tokens; with the staying
//                   tokens in descending order of logit (ascending index on a tie), the token
//                   chosen is the first whose running sum of p exceeds u, u uniform in [0, 1).
// u is a pure function of (seed, step, sequence): Philox4x32-10 (core/philox.hpp), 53 bits. So a
// seed gives the same tokens on every run and on either device for the same logits; it does not
// reproduce PyTorch's draws (torch.multinomial's generator is another).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/philox.hpp"

namespace kiln::models {

// What sampling reads of GenerationConfig (decoder.hpp), by HF's names and defaults.
struct Sampling {
  double temperature = 1.0;
  long top_k = 50;     // 0: no top-k
  double top_p = 1.0;  // 1: no top-p
  std::uint64_t seed = 0;
};

// Throws ValueError naming `who` for a temperature that is not positive and finite, a top_p
// outside (0, 1] or a negative top_k.
inline void check_sampling(const Sampling& s, const std::string& who) {
  if (!(s.temperature > 0) || !std::isfinite(s.temperature))
    throw ValueError(who + ": temperature must be positive and finite, not " + std::to_string(s.temperature));
  if (!(s.top_p > 0 && s.top_p <= 1)) throw ValueError(who + ": top_p must be in (0, 1], not " + std::to_string(s.top_p));
  if (s.top_k < 0) throw ValueError(who + ": top_k must be 0 (off) or more, not " + std::to_string(s.top_k));
}

// The uniform number in [0, 1) of sequence `sequence` at decode step `step`: 53 bits of one
// Philox block.
inline double sampling_uniform(std::uint64_t seed, std::uint64_t step, std::uint64_t sequence) {
  const philox::Words w = philox::block(seed, step, 0x73616d70u /* "samp" */, sequence);
  const std::uint64_t bits = (static_cast<std::uint64_t>(w.w[0] >> 5) << 26) | (w.w[1] >> 6);
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// The token drawn from logits[0 .. vocab) with uniform u (the maths at the top of this file).
// A NaN logit is a ValueError naming `who`.
template <class L>
long sample_token(const L* logits, std::size_t vocab, const Sampling& s, double u, const std::string& who) {
  std::vector<double> x(vocab);
  for (std::size_t i = 0; i < vocab; ++i) {
    if (std::isnan(static_cast<double>(logits[i])))
      throw ValueError(who + ": a NaN logit (token " + std::to_string(i) + ") cannot be sampled from");
    x[i] = static_cast<double>(logits[i]) / s.temperature;
  }
  // Descending logit, ascending index on a tie. Only the tokens top-k keeps are sorted: with
  // top_k = 50 that is 50 of GPT-2's 50,257 per new token.
  const auto before = [&](std::size_t a, std::size_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
  std::vector<std::size_t> order(vocab);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::size_t keep = vocab;
  if (s.top_k > 0 && static_cast<std::size_t>(s.top_k) < vocab) {
    const auto k = static_cast<std::ptrdiff_t>(s.top_k);
    std::nth_element(order.begin(), order.begin() + (k - 1), order.end(), before);
    const double kth = x[order[static_cast<std::size_t>(k - 1)]];
    // The tokens tied with the k-th stay too.
    keep = static_cast<std::size_t>(std::partition(order.begin() + k, order.end(), [&](std::size_t i) { return x[i] >= kth; }) -
                                    order.begin());
  }
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), before);
  const double top = x[order[0]];
  std::vector<double> p(keep);
  double total = 0;
  for (std::size_t r = 0; r < keep; ++r) total += p[r] = std::exp(x[order[r]] - top);
  if (s.top_p < 1) {
    // Ascending from the smallest kept: drop while the mass so far stays within 1 - top_p.
    double below = 0;
    std::size_t kept = keep;
    for (std::size_t r = keep; r-- > 1;) {
      below += p[r] / total;
      if (below > 1 - s.top_p) break;
      kept = r;
    }
    keep = kept;
    total = 0;
    for (std::size_t r = 0; r < keep; ++r) total += p[r];
  }
  const double target = u * total;
  double run = 0;
  for (std::size_t r = 0; r < keep; ++r) {
    run += p[r];
    if (run > target) return static_cast<long>(order[r]);
  }
  return static_cast<long>(order[keep - 1]);  // u * total at the sum's rounding
}

}  // namespace kiln::models
