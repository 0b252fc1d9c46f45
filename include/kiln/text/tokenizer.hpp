// kiln: a byte-level BPE tokenizer read from a Hugging Face tokenizer.json (GPT-2's kind), giving
// the ids that HF's `tokenizers` gives, and back to text.
//
//   auto tok = kiln::text::Tokenizer::from_pretrained("gpt2");      // gpt2/tokenizer.json
//   std::vector<kiln::i64> ids = tok.encode("Hello, my dog is cute");
//   std::string text = tok.decode(ids);
//
// encode(text), text being UTF-8:
//   1. The added tokens (tokenizer.json's "added_tokens", <|endoftext|> say) are found in the
//      text first, the longest at each position, and become their ids.
//   2. Between them, the text is split into pieces by GPT-2's pattern, the first alternative
//      that matches at each position:
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      (\p{L}, \p{N}: text/unicode_classes.hpp; \s: Unicode White_Space).
//   3. Each piece's UTF-8 bytes become characters by GPT-2's byte-to-unicode table (printable
//      bytes stand for themselves, the others for 256 + n), and adjacent symbols merge, the
//      pair of lowest rank in "merges" first, until no pair of the table is left.
//   4. Each symbol is looked up in "vocab".
// decode(ids) maps each id back to its token, the token's characters back to bytes (added tokens
// are their content), and returns them as UTF-8, U+FFFD for each invalid sequence (as HF).
// Also read: ByteLevel's add_prefix_space (a space before text that has none) and use_regex
// (false: no split), and the model's ignore_merges (a piece that is a token is that token). The
// post-processor is not applied: encode() adds no BOS or EOS (GPT-2's adds none).
//
// What is refused with a FileError naming the file: anything but a "BPE" model with a
// "ByteLevel" pre-tokenizer (alone or alone in a Sequence); a normalizer; byte_fallback, a
// continuing-subword prefix or an end-of-word suffix; an added token that strips the spaces
// beside it; a merge whose parts or result are not in the vocabulary. Text that
// is not UTF-8 is a ValueError naming the byte; an id outside the vocabulary an IndexError.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <functional>
#include <optional>
#include <queue>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kiln/core/dtype.hpp"
#include "kiln/core/errors.hpp"
#include "kiln/core/file.hpp"
#include "kiln/text/unicode_classes.hpp"

namespace kiln::text {

// Whether code point c is in the sorted ranges r.
template <std::size_t N>
constexpr bool in_ranges(const CodeRange (&r)[N], std::uint32_t c) {
  std::size_t lo = 0, hi = N;
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (r[mid].last < c) lo = mid + 1;
    else hi = mid;
  }
  return lo < N && r[lo].first <= c;
}
constexpr bool is_letter(std::uint32_t c) { return c < 0x80 ? ((c | 0x20) - 'a' < 26) : in_ranges(kLetterRanges, c); }
constexpr bool is_number(std::uint32_t c) { return c < 0x80 ? (c - '0' < 10) : in_ranges(kNumberRanges, c); }
// Unicode's White_Space property.
constexpr bool is_space(std::uint32_t c) {
  return (c >= 0x9 && c <= 0xD) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// A UTF-8 encoding of code point c appended to out.
inline void append_utf8(std::string& out, std::uint32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// The UTF-8 sequence at s[i] (of n bytes): its length, with its code point in c, where it is
// well formed (Unicode's table 3-7: no overlong form, surrogate or value above U+10FFFF); else
// minus the length of its maximal invalid subpart (at least 1), Unicode's unit of replacement.
inline int utf8_sequence(const unsigned char* s, std::size_t n, std::size_t i, std::uint32_t& c) {
  const unsigned char b = s[i];
  if (b < 0x80) return c = b, 1;
  int len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
  if (b >= 0xC2 && b <= 0xDF) len = 2, c = b & 0x1F;
  else if (b >= 0xE0 && b <= 0xEF) len = 3, c = b & 0x0F, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) len = 4, c = b & 0x07, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  else return -1;
  int k = 1;
  for (; k < len && i + static_cast<std::size_t>(k) < n; ++k) {
    const unsigned char x = s[i + static_cast<std::size_t>(k)];
    if (k == 1 ? (x < lo || x > hi) : (x & 0xC0) != 0x80) break;
    c = (c << 6) | (x & 0x3F);
  }
  return k == len ? len : -k;
}

// The code points of UTF-8 text, with the byte offset of each (and text.size() at the end).
// Text that is not UTF-8 is a ValueError naming `who` and the byte.
inline void decode_utf8(std::string_view text, std::vector<std::uint32_t>& cps, std::vector<std::size_t>& at,
                        const std::string& who) {
  cps.clear(), at.clear();
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t c = 0;
    const int len = utf8_sequence(s, text.size(), i, c);
    if (len < 0) throw ValueError(who + ": the text is not UTF-8 at byte " + std::to_string(i));
    cps.push_back(c);
    at.push_back(i);
    i += static_cast<std::size_t>(len);
  }
  at.push_back(text.size());
}

// bytes as UTF-8, each maximal invalid subpart replaced by U+FFFD (Unicode's recommended
// practice, and Rust's String::from_utf8_lossy, which HF's decode uses).
inline std::string utf8_lossy(std::string_view bytes) {
  const auto* s = reinterpret_cast<const unsigned char*>(bytes.data());
  std::string out;
  out.reserve(bytes.size());
  for (std::size_t i = 0; i < bytes.size();) {
    std::uint32_t c = 0;
    const int len = utf8_sequence(s, bytes.size(), i, c);
    if (len > 0) out.append(bytes.substr(i, static_cast<std::size_t>(len)));
    else out += "\xEF\xBF\xBD";
    i += static_cast<std::size_t>(len > 0 ? len : -len);
  }
  return out;
}

// The pieces of GPT-2's pattern (the top of this file) over code points cps[0, n): each piece's
// [begin, end) in code points.
inline std::vector<std::pair<std::size_t, std::size_t>> split_gpt2(const std::vector<std::uint32_t>& cps) {
  const std::size_t n = cps.size();
  auto run = [&](std::size_t i, auto&& pred) {
    while (i < n && pred(cps[i])) ++i;
    return i;
  };
  std::vector<std::pair<std::size_t, std::size_t>> pieces;
  for (std::size_t i = 0; i < n;) {
    std::size_t end = i;
    const std::uint32_t c = cps[i];
    const bool space_then = c == ' ' && i + 1 < n;
    if (c == '\'' && i + 1 < n) {  // 's 't 're 've 'm 'll 'd
      const std::uint32_t a = cps[i + 1], b = i + 2 < n ? cps[i + 2] : 0;
      if (a == 's' || a == 't' || a == 'm' || a == 'd') end = i + 2;
      else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) end = i + 3;
    }
    if (end == i) {
      for (auto pred : {+[](std::uint32_t x) { return is_letter(x); }, +[](std::uint32_t x) { return is_number(x); },
                        +[](std::uint32_t x) { return !is_space(x) && !is_letter(x) && !is_number(x); }}) {
        if (pred(c)) end = run(i, pred);
        else if (space_then && pred(cps[i + 1])) end = run(i + 1, pred);
        if (end != i) break;
      }
    }
    if (end == i && is_space(c)) {  // \s+(?!\S), else \s+
      const std::size_t j = run(i, is_space);
      end = j == n || j - 1 == i ? j : j - 1;
    }
    if (end == i) end = i + 1;  // not reached: every code point is a space, a letter, a number or other
    pieces.emplace_back(i, end);
    i = end;
  }
  return pieces;
}

class Tokenizer {
 public:
  static constexpr std::size_t kMaxBytes = std::size_t{256} << 20;
  // Ids are below 2^21 (2,097,152; the largest vocabularies in use have about 256,000 tokens).
  static constexpr long long kMaxIds = 1LL << 21;

  // Reads dir/tokenizer.json.
  static Tokenizer from_pretrained(const std::string& dir) { return from_file(dir + "/tokenizer.json"); }
  // Reads a tokenizer.json: a FileError naming it if it cannot be read or is not a byte-level
  // BPE tokenizer kiln reads (the top of this file).
  static Tokenizer from_file(const std::string& path) {
    std::string why;
    const kiln::detail::RegularFile file(path.c_str(), why);
    if (!file.ok()) throw FileError("tokenizer " + path + ": " + (file.error() ? "cannot open it: " + std::string(std::strerror(file.error())) : why));
    if (file.size() > kMaxBytes) throw FileError("tokenizer " + path + ": larger than 256 MiB");
    const std::optional<std::string> text = file.read_all();
    if (!text) throw FileError("tokenizer " + path + ": cannot read it");
    return from_json(*text, path);
  }
  // The same from the file's text; `what` names it in errors.
  static Tokenizer from_json(const std::string& text, const std::string& what) {
    Tokenizer t;
    t.what_ = "tokenizer " + what;
    t.parse(text);
    return t;
  }

  // The ids of UTF-8 text (the top of this file).
  std::vector<i64> encode(std::string_view text) const {
    std::vector<i64> ids;
    std::size_t from = 0;
    while (from < text.size()) {
      // The next added token: the earliest, the longest there.
      std::size_t at = text.size(), len = 0;
      i64 id = -1;
      for (const auto& [content, aid] : added_) {
        const std::size_t p = text.find(content, from);
        if (p != std::string_view::npos && (p < at || (p == at && content.size() > len))) at = p, len = content.size(), id = aid;
      }
      encode_ordinary(text.substr(from, at - from), ids);
      if (id < 0) break;
      ids.push_back(id);
      from = at + len;
    }
    return ids;
  }

  // The text of ids; with skip_special_tokens, added tokens marked special are left out. The
  // tokens' bytes that are not UTF-8 (a character cut between tokens) become U+FFFD, as HF's
  // decode does. An id outside the vocabulary is an IndexError.
  std::string decode(const std::vector<i64>& ids, bool skip_special_tokens = false) const {
    std::string out;
    for (std::size_t k = 0; k < ids.size(); ++k) {
      const i64 id = ids[k];
      if (id < 0 || static_cast<std::size_t>(id) >= tokens_.size() || !tokens_[static_cast<std::size_t>(id)])
        throw IndexError(what_ + ": decode: id " + std::to_string(id) + " at position " + std::to_string(k) +
                         " is not in the vocabulary");
      const Token& t = *tokens_[static_cast<std::size_t>(id)];
      if (!(skip_special_tokens && t.special)) out += t.bytes;
    }
    return utf8_lossy(out);
  }

  // The number of ids (the largest id plus one).
  std::size_t vocab_size() const { return tokens_.size(); }
  // The id of a token as tokenizer.json spells it (byte-level characters: "Ġthe"), if any.
  std::optional<i64> token_to_id(const std::string& token) const {
    if (auto it = vocab_.find(token); it != vocab_.end()) return it->second;
    for (const auto& [content, id] : added_)
      if (content == token) return id;
    return std::nullopt;
  }

 private:
  struct Token {
    std::string text;   // as tokenizer.json spells it
    std::string bytes;  // what it decodes to: an added token's text, else its characters mapped back to bytes
    bool added = false, special = false;
  };
  struct PairHash {
    std::size_t operator()(const std::pair<i64, i64>& p) const {
      return std::hash<std::uint64_t>()(static_cast<std::uint64_t>(p.first) * 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(p.second));
    }
  };

  [[noreturn]] void fail(const std::string& why) const { throw FileError(what_ + ": " + why); }

  // The ByteLevel pre-tokenizer, alone or the only one in a Sequence, or null.
  static const nlohmann::json* byte_level(const nlohmann::json& pre) {
    if (!pre.is_object()) return nullptr;
    if (pre.value("type", "") == "ByteLevel") return &pre;
    if (pre.value("type", "") == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array() &&
        pre["pretokenizers"].size() == 1)
      return byte_level(pre["pretokenizers"][0]);
    return nullptr;
  }

  void parse(const std::string& text) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      fail(std::string("not JSON: ") + e.what());
    }
    if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) fail("no \"model\" object");
    const auto& m = j["model"];
    if (m.value("type", "BPE") != "BPE") fail("the model is \"" + m.value("type", "") + "\"; kiln reads byte-level BPE only");
    const nlohmann::json* pre = j.contains("pre_tokenizer") ? byte_level(j["pre_tokenizer"]) : nullptr;
    if (!pre) fail("the pre-tokenizer is not ByteLevel; kiln reads byte-level BPE only");
    add_prefix_space_ = pre->value("add_prefix_space", false);
    use_regex_ = pre->value("use_regex", true);
    if (j.contains("normalizer") && !j["normalizer"].is_null()) fail("it has a normalizer, which kiln does not apply");
    ignore_merges_ = m.value("ignore_merges", false);
    if (m.contains("byte_fallback") && m["byte_fallback"].is_boolean() && m["byte_fallback"].get<bool>())
      fail("byte_fallback is set; kiln reads byte-level BPE only");
    for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
        fail(std::string("\"") + k + "\" is set; GPT-2's byte-level BPE has none");
    if (!m.contains("vocab") || !m["vocab"].is_object()) fail("model.vocab is not an object");
    for (const auto& [tok, id] : m["vocab"].items()) {
      if (!id.is_number_integer() || id.get<long long>() < 0 || id.get<long long>() >= kMaxIds)
        fail("model.vocab[\"" + tok + "\"] is " + id.dump() + ", not an id in [0, " + std::to_string(kMaxIds) + ")");
      add_token(tok, id.get<i64>(), false, false);
      vocab_[tok] = id.get<i64>();
    }
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const auto& a : j["added_tokens"]) {
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
            !a["content"].is_string() || a["id"].get<long long>() < 0 || a["id"].get<long long>() >= kMaxIds)
          fail("an added token is not {\"id\": n, \"content\": \"...\"}: " + a.dump());
        const std::string content = a["content"].get<std::string>();
        if (content.empty()) fail("an added token is empty");
        if (a.value("lstrip", false) || a.value("rstrip", false))
          fail("added token \"" + content + "\" strips the spaces beside it, which kiln does not do");
        add_token(content, a["id"].get<i64>(), true, a.value("special", false));
        added_.emplace_back(content, a["id"].get<i64>());
      }
    }
    if (!m.contains("merges") || !m["merges"].is_array()) fail("model.merges is not a list");
    i64 rank = 0;
    for (const auto& mg : m["merges"]) {
      std::string a, b;
      if (mg.is_string()) {  // "a b"
        const std::string s = mg.get<std::string>();
        const std::size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == s.size() || s.find(' ', sp + 1) != std::string::npos)
          fail("merge " + std::to_string(rank) + " is \"" + s + "\", not two tokens and a space");
        a = s.substr(0, sp), b = s.substr(sp + 1);
      } else if (mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string()) {  // ["a", "b"]
        a = mg[0].get<std::string>(), b = mg[1].get<std::string>();
      } else {
        fail("merge " + std::to_string(rank) + " is " + mg.dump() + ", neither \"a b\" nor [\"a\", \"b\"]");
      }
      const auto ia = vocab_.find(a), ib = vocab_.find(b), ic = vocab_.find(a + b);
      if (ia == vocab_.end() || ib == vocab_.end() || ic == vocab_.end())
        fail("merge " + std::to_string(rank) + " (\"" + a + "\" \"" + b + "\") names a token outside the vocabulary");
      merges_.emplace(std::make_pair(ia->second, ib->second), std::make_pair(rank++, ic->second));
    }
    // GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others for 256 + n.
    unsigned char char_to_byte[512] = {};
    bool char_is_byte[512] = {};
    for (std::uint32_t b = 0, n = 256; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      const std::uint32_t c = printable ? b : n++;
      byte_char_[b] = c;
      char_to_byte[c] = static_cast<unsigned char>(b);
      char_is_byte[c] = true;
      std::string s;
      append_utf8(s, c);
      const auto it = vocab_.find(s);
      byte_id_[b] = it == vocab_.end() ? -1 : it->second;
    }
    // What each vocabulary token decodes to, once: a character outside the table stands for
    // itself, as in HF. (nlohmann's parser has checked that every string is UTF-8.)
    std::vector<std::uint32_t> cps;
    std::vector<std::size_t> at;
    for (auto& t : tokens_) {
      if (!t || t->added) continue;
      decode_utf8(t->text, cps, at, what_);
      for (std::uint32_t c : cps) {
        if (c < 512 && char_is_byte[c]) t->bytes += static_cast<char>(char_to_byte[c]);
        else append_utf8(t->bytes, c);
      }
    }
    std::sort(added_.begin(), added_.end());
  }

  // Token `id` is `text`; an id given to two different texts is a FileError (an added token
  // may repeat a vocabulary entry with the same text, as GPT-2's <|endoftext|> does).
  void add_token(const std::string& text, i64 id, bool added, bool special) {
    const auto i = static_cast<std::size_t>(id);
    if (tokens_.size() <= i) tokens_.resize(i + 1);
    if (tokens_[i] && tokens_[i]->text != text)
      fail("id " + std::to_string(id) + " is given to both \"" + tokens_[i]->text + "\" and \"" + text + "\"");
    tokens_[i] = Token{text, added ? text : std::string(), added, special};
  }

  // Steps 2-4 of encode() over text without added tokens, appended to ids.
  void encode_ordinary(std::string_view text, std::vector<i64>& ids) const {
    if (text.empty()) return;
    std::vector<std::uint32_t> cps;
    std::vector<std::size_t> at;
    std::string spaced;
    if (add_prefix_space_ && text.front() != ' ') {
      spaced = " " + std::string(text);
      text = spaced;
    }
    decode_utf8(text, cps, at, what_ + ": encode");
    std::vector<i64> word;
    std::string piece;
    const auto pieces = use_regex_ ? split_gpt2(cps) : std::vector<std::pair<std::size_t, std::size_t>>{{0, cps.size()}};
    for (const auto& [b, e] : pieces) {
      if (ignore_merges_) {  // a piece that is a token is that token (Llama 3's tokenizers)
        piece.clear();
        for (std::size_t k = at[b]; k < at[e]; ++k) append_utf8(piece, byte_char_[static_cast<unsigned char>(text[k])]);
        if (const auto it = vocab_.find(piece); it != vocab_.end()) {
          ids.push_back(it->second);
          continue;
        }
      }
      word.clear();
      for (std::size_t k = at[b]; k < at[e]; ++k) {
        const i64 id = byte_id_[static_cast<unsigned char>(text[k])];
        if (id < 0)
          throw ValueError(what_ + ": encode: byte " + std::to_string(static_cast<unsigned char>(text[k])) +
                           " has no token in the vocabulary");
        word.push_back(id);
      }
      merge(word);
      ids.insert(ids.end(), word.begin(), word.end());
    }
  }

  // BPE over one piece: merges the adjacent pair of lowest rank (the leftmost of equal ranks)
  // until no adjacent pair is in merges_. A heap of candidate pairs over a linked list of
  // symbols, as HF's BPE: O(n log n) in the piece's bytes, so a long run of letters costs no more
  // than its length.
  void merge(std::vector<i64>& w) const {
    const std::size_t n = w.size();
    if (n < 2) return;
    std::vector<std::size_t> next(n), prev(n);
    std::vector<bool> alive(n, true);
    for (std::size_t k = 0; k < n; ++k) next[k] = k + 1, prev[k] = k - 1;  // n and SIZE_MAX: none
    struct Candidate {
      i64 rank;
      std::size_t at;
      i64 left, right, into;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : at > o.at; }
    };
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    auto offer = [&](std::size_t k) {
      if (k >= n || next[k] >= n) return;
      if (const auto it = merges_.find({w[k], w[next[k]]}); it != merges_.end())
        heap.push({it->second.first, k, w[k], w[next[k]], it->second.second});
    };
    for (std::size_t k = 0; k + 1 < n; ++k) offer(k);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      const std::size_t k = c.at, j = next[k];
      if (!alive[k] || j >= n || w[k] != c.left || w[j] != c.right) continue;  // stale
      w[k] = c.into;
      alive[j] = false;
      next[k] = next[j];
      if (next[j] < n) prev[next[j]] = k;
      if (prev[k] < n) offer(prev[k]);
      offer(k);
    }
    std::size_t out = 0;
    for (std::size_t k = 0; k < n; k = next[k]) w[out++] = w[k];
    w.resize(out);
  }

  std::string what_;
  std::unordered_map<std::string, i64> vocab_;
  std::vector<std::optional<Token>> tokens_;
  std::vector<std::pair<std::string, i64>> added_;
  std::unordered_map<std::pair<i64, i64>, std::pair<i64, i64>, PairHash> merges_;  // pair -> (rank, merged id)
  bool add_prefix_space_ = false, use_regex_ = true, ignore_merges_ = false;
  std::uint32_t byte_char_[256] = {};  // GPT-2's character for each byte
  i64 byte_id_[256] = {};              // the token of each byte's character, or -1
};

}  // namespace kiln::text
