// kiln: what generate() of a decoder-only model (models/decoder.hpp) does between forwards:
// its options (GenerationConfig, HF's names), a padded batch's attention mask read as left
// padding, and the loop that picks each new token (greedy on the device, or a draw by
// models/sampling.hpp) and stops at end-of-sequence tokens.
//
// Padded batches. A batch of prompts of different lengths is left-padded, as HF's tokenizer does
// with padding_side="left": row b of attention_mask [batch, seq] is pads[b] zeros then ones. The
// model's attention then sees, for sequence b, the keys of its window [pads[b], end) (kiln::
// attention with a [batch, 2] window operand), so padding is never attended to, and generate()
// numbers sequence b's tokens from its first real one (position = index - pads[b]), as HF's
// generate() derives position_ids from the mask.
#pragma once
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/core/factories.hpp"
#include "kiln/models/sampling.hpp"

namespace kiln::models {

// Options of generate(), by the names and defaults of HF's GenerationConfig. eos_token_id and
// pad_token_id default to the model's configuration (config.json); the pad defaults to the
// first eos. Greedy unless do_sample; then temperature, top_k and top_p shape the distribution
// and seed picks the draws (models/sampling.hpp).
struct GenerationConfig {
  long max_new_tokens = 32;
  // (The empty initializers let `{.max_new_tokens = 8}` leave these out without a warning.)
  std::optional<std::vector<long>> eos_token_id{};  // {} for none: always max_new_tokens tokens
  std::optional<long> pad_token_id{};
  bool do_sample = false;
  double temperature = 1.0;
  long top_k = 50;     // 0: off
  double top_p = 1.0;  // 1: off
  std::uint64_t seed = 0;
  Sampling sampling() const { return {temperature, top_k, top_p, seed}; }
};

// Each row's left padding: the number of leading zeros of attention_mask [batch, seq] (0 and 1,
// on any device), checked against input_ids' shape. A value other than 0 and 1, or a 0 after a 1
// (right padding, or a hole), is a ValueError naming the row: kiln's attention masks a window of
// keys per sequence, which is what left padding needs.
inline std::vector<std::size_t> left_padding(const Tensor<i64>& attention_mask, const Shape& ids, const std::string& who) {
  if (!(attention_mask.shape() == ids))
    throw ShapeError(who + ": attention_mask " + attention_mask.shape().str() + " must have input_ids' shape " + ids.str());
  const Tensor<i64> m = attention_mask.cpu();
  const std::size_t B = ids[0], S = ids[1];
  std::vector<std::size_t> pads(B, 0);
  for (std::size_t b = 0; b < B; ++b) {
    const i64* row = m.data() + b * S;
    std::size_t i = 0;
    while (i < S && row[i] == 0) ++i;
    pads[b] = i;
    for (; i < S; ++i)
      if (row[i] != 1)
        throw ValueError(who + ": attention_mask[" + std::to_string(b) + ", " + std::to_string(i) + "] is " +
                         std::to_string(row[i]) +
                         (row[i] == 0 ? " after a 1: kiln takes left padding only (pad on the left, as HF's tokenizer "
                                        "does with padding_side=\"left\")"
                                      : "; a mask holds 0 (padding) and 1 (a token)"));
  }
  return pads;
}

// The attention's key windows [batch, 2]: sequence b sees keys [pads[b], end).
inline Tensor<i64> key_windows(const std::vector<std::size_t>& pads, std::size_t end, Device device = Device::cpu()) {
  std::vector<i64> w;
  w.reserve(2 * pads.size());
  for (const std::size_t p : pads) w.insert(w.end(), {static_cast<i64>(std::min(p, end)), static_cast<i64>(end)});
  return from_vector(w, Shape{pads.size(), 2}, device);
}

// The position of token i of sequence b in a forward of positions [first, first + seq): first +
// i - pads[b], and 0 for padding (its value reaches no real token).
inline std::vector<long> token_positions(std::size_t first, std::size_t seq, const std::vector<std::size_t>& pads) {
  std::vector<long> p;
  p.reserve(pads.size() * seq);
  for (const std::size_t pad : pads)
    for (std::size_t i = 0; i < seq; ++i) p.push_back(first + i < pad ? 0L : static_cast<long>(first + i - pad));
  return p;
}

// What a forward step of generate() gives its loop: each sequence's largest logit's token
// (greedy), or the last position's logits, [batch, vocab] row-major (sampling).
template <class Logits>
struct StepResult {
  std::vector<i64> best;
  std::vector<Logits> last;
};

// generate()'s loop over a prompt [B, S] (row-major): next(ids [B, seq], first, seq) runs a
// forward at positions [first, first + seq) and returns a StepResult; the token of sequence b at
// step t is its best[b], or with do_sample a draw from its logits with uniform number
// sampling_uniform(seed, t, b). A sequence that has produced an end-of-sequence token gets the
// pad token from then on; the loop stops once every sequence has, or after max_new_tokens.
// Returns [B, S + the steps run].
template <class Logits, class Next>
Tensor<i64> decode_tokens(const std::vector<i64>& prompt, std::size_t B, std::size_t S, std::size_t vocab,
                          const std::vector<long>& eos, long pad, const GenerationConfig& gen, const std::string& who,
                          Device device, Next&& next) {
  const std::size_t N = static_cast<std::size_t>(gen.max_new_tokens);
  const Sampling sampling = gen.sampling();
  std::vector<std::vector<i64>> tokens(B);
  for (std::size_t b = 0; b < B; ++b) tokens[b].assign(prompt.begin() + b * S, prompt.begin() + (b + 1) * S);
  std::vector<bool> finished(B, false);
  std::vector<i64> step = prompt;
  for (std::size_t t = 0; t < N && std::find(finished.begin(), finished.end(), false) != finished.end(); ++t) {
    const std::size_t first = t == 0 ? 0 : S + t - 1, seq = t == 0 ? S : 1;
    const StepResult<Logits> r = next(step, first, seq);
    step.assign(B, 0);
    for (std::size_t b = 0; b < B; ++b) {
      const i64 chosen = !gen.do_sample ? r.best[b]
                                        : sample_token(r.last.data() + b * vocab, vocab, sampling,
                                                       sampling_uniform(gen.seed, t, b), who);
      step[b] = finished[b] ? static_cast<i64>(pad) : chosen;
      finished[b] = finished[b] || std::find(eos.begin(), eos.end(), static_cast<long>(step[b])) != eos.end();
      tokens[b].push_back(step[b]);
    }
  }
  std::vector<i64> flat;
  for (const auto& row : tokens) flat.insert(flat.end(), row.begin(), row.end());
  return from_vector(flat, Shape{B, tokens[0].size()}, device);
}

}  // namespace kiln::models
