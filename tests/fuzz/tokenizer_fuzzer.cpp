// libFuzzer target: the byte-level BPE tokenizer (kiln/text/tokenizer.hpp) on arbitrary bytes.
// The input is a tokenizer.json, a NUL byte, then a text. A tokenizer.json kiln refuses must be
// a kiln::FileError; the text, once a tokenizer is read, must encode or be a kiln::ValueError
// (not UTF-8, a byte without a token). Invariants, whose failure is a finding (abort):
//   - decode(encode(text)) == text for UTF-8 text (byte-level BPE loses nothing), without a
//     prefix space;
//   - every id encode gives is in the vocabulary;
//   - decode of the text's bytes read as ids is a kiln::IndexError or valid UTF-8.
// A crash, a sanitizer report, a leak or any other exception is a finding too.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kiln/core/errors.hpp"
#include "kiln/text/tokenizer.hpp"

namespace {
bool valid_utf8(const std::string& s) {
  std::vector<std::uint32_t> cps;
  std::vector<std::size_t> at;
  try {
    kiln::text::decode_utf8(s, cps, at, "fuzz");
    return true;
  } catch (const kiln::ValueError&) {
    return false;
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const char* p = reinterpret_cast<const char*>(data);
  const char* nul = static_cast<const char*>(std::memchr(p, 0, size));
  const std::string json(p, nul ? static_cast<std::size_t>(nul - p) : size);
  const std::string text = nul ? std::string(nul + 1, p + size) : std::string();
  std::optional<kiln::text::Tokenizer> tok;
  try {
    tok.emplace(kiln::text::Tokenizer::from_json(json, "fuzz"));
  } catch (const kiln::FileError&) {
    return 0;
  }
  try {
    const std::vector<kiln::i64> ids = tok->encode(text);
    for (kiln::i64 id : ids)
      if (id < 0 || static_cast<std::size_t>(id) >= tok->vocab_size()) std::abort();
    const bool prefixed = json.find("\"add_prefix_space\": true") != std::string::npos ||
                          json.find("\"add_prefix_space\":true") != std::string::npos;
    if (!prefixed && tok->decode(ids) != text) std::abort();
  } catch (const kiln::ValueError&) {
  }
  std::vector<kiln::i64> raw;
  for (unsigned char c : text) raw.push_back(static_cast<kiln::i64>(c) * 3 - 20);
  try {
    if (!valid_utf8(tok->decode(raw))) std::abort();
  } catch (const kiln::IndexError&) {
  }
  return 0;
}
