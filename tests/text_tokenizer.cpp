// kiln::text::Tokenizer against Hugging Face's `tokenizers`: tests/data/bpe_tiny holds a
// byte-level BPE tokenizer of GPT-2's kind and the ids `tokenizers` 0.19.1 gives for each test
// text (tests/data/make_tokenizer_fixture.py): contractions, numbers, runs of spaces, tabs and
// newlines, <|endoftext|>, accents, Greek, Cyrillic, CJK, emoji, combining marks and Unicode
// spaces.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/text/tokenizer.hpp"

namespace {
const std::string kDir = KILN_TEST_DATA_DIR "/bpe_tiny";

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The fixture's tokenizer.json with `edit` applied to its JSON.
kiln::text::Tokenizer edited(const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(read(kDir + "/tokenizer.json"));
  edit(j);
  return kiln::text::Tokenizer::from_json(j.dump(), "edited");
}
}  // namespace

TEST_CASE("the byte-level BPE tokenizer gives the ids of HF's tokenizers, and decodes them back") {
  const auto tok = kiln::text::Tokenizer::from_pretrained(kDir);
  CHECK(tok.vocab_size() == 638);
  CHECK(tok.token_to_id("<|endoftext|>") == 0);
  const auto ref = nlohmann::json::parse(read(kDir + "/reference.json"));
  REQUIRE(ref["cases"].size() == 13);
  for (const auto& c : ref["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<kiln::i64> want = c["ids"].get<std::vector<kiln::i64>>();
    INFO("text: \"" << text << "\"");
    CHECK(tok.encode(text) == want);
    CHECK(tok.decode(want) == text);
  }
  // A piece of 100,000 letters: merged in O(n log n), and back.
  const std::string run(100000, 'a');
  CHECK(tok.decode(tok.encode(run)) == run);
  const auto ids = tok.encode("<|endoftext|>Hello<|endoftext|>");
  CHECK(ids.front() == 0);
  CHECK(ids.back() == 0);
  CHECK(tok.decode(ids, /*skip_special_tokens=*/true) == "Hello");
}

TEST_CASE("decode turns bytes that are not UTF-8 into U+FFFD, a maximal invalid sequence at a time, as HF") {
  using kiln::text::utf8_lossy;
  const std::string r = "\xEF\xBF\xBD";
  CHECK(utf8_lossy("plain \xC3\xA7" "a") == "plain \xC3\xA7" "a");
  CHECK(utf8_lossy("a\xFF b") == "a" + r + " b");
  CHECK(utf8_lossy("\xE6\x97") == r);                        // a character cut short: one
  CHECK(utf8_lossy("\xF0\x9F\x99x") == r + "x");
  CHECK(utf8_lossy("\xED\xA0\x80") == r + r + r);           // a surrogate: one per byte
  CHECK(utf8_lossy("\xC0\x80") == r + r);                     // an overlong form
  const auto tok = kiln::text::Tokenizer::from_pretrained(kDir);
  const auto ids = tok.encode("\xF0\x9F\x99\x82");          // an emoji the merges may split
  std::vector<kiln::i64> cut(ids.begin(), ids.end() - 1);
  if (!cut.empty()) CHECK(tok.decode(cut).find(r) != std::string::npos);
}

TEST_CASE("GPT-2's pattern splits contractions, letters, numbers, other characters and spaces") {
  std::vector<std::uint32_t> cps;
  std::vector<std::size_t> at;
  const std::string text = "I'm  here's 42x!!\n\n  \tend ";
  kiln::text::decode_utf8(text, cps, at, "test");
  std::vector<std::string> pieces;
  for (const auto& [b, e] : kiln::text::split_gpt2(cps)) pieces.push_back(text.substr(at[b], at[e] - at[b]));
  // A run of spaces gives all but its last to one piece when a non-space follows; the last
  // space joins the next word. A single newline before a non-space stands alone.
  const std::vector<std::string> want{"I", "'m", " ", " here", "'s", " 42", "x", "!!", "\n\n  ", "\t", "end", " "};
  CHECK(pieces == want);
}

TEST_CASE("the tokenizer refuses text that is not UTF-8, unknown ids and files it cannot read") {
  const auto tok = kiln::text::Tokenizer::from_pretrained(kDir);
  CHECK_THROWS_WITH_AS(tok.encode("ok \xff"), doctest::Contains("the text is not UTF-8 at byte 3"), kiln::ValueError);
  CHECK_THROWS_AS(tok.encode("\xc0\x80"), kiln::ValueError);        // an overlong NUL
  CHECK_THROWS_AS(tok.encode("\xe6\x97"), kiln::ValueError);        // cut short
  CHECK_THROWS_AS(tok.encode("\xed\xa0\x80"), kiln::ValueError);    // a surrogate
  CHECK_THROWS_WITH_AS(tok.decode({1, 638}), doctest::Contains("decode: id 638 at position 1 is not in the vocabulary"),
                       kiln::IndexError);
  CHECK_THROWS_AS(tok.decode({-1}), kiln::IndexError);
  CHECK_THROWS_WITH_AS(kiln::text::Tokenizer::from_pretrained(kDir + "/missing"), doctest::Contains("cannot open it"),
                       kiln::FileError);
  CHECK_THROWS_WITH_AS(kiln::text::Tokenizer::from_file("/dev/zero"), doctest::Contains("not a regular file"), kiln::FileError);
  CHECK_THROWS_WITH_AS(kiln::text::Tokenizer::from_json("{\"model\": ", "t"), doctest::Contains("not JSON"), kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["model"]["type"] = "WordPiece"; }),
                       doctest::Contains("kiln reads byte-level BPE only"), kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }),
                       doctest::Contains("the pre-tokenizer is not ByteLevel"), kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["normalizer"] = {{"type", "NFC"}}; }), doctest::Contains("normalizer"),
                       kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["model"]["merges"].push_back("Ġnot-a-token x"); }),
                       doctest::Contains("names a token outside the vocabulary"), kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["model"]["merges"].push_back("abc"); }),
                       doctest::Contains("not two tokens and a space"), kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["model"]["vocab"]["x"] = -3; }), doctest::Contains("not an id"),
                       kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["model"]["vocab"]["x"] = j["model"]["vocab"]["y"]; }),
                       doctest::Contains("is given to both"), kiln::FileError);
  CHECK_THROWS_WITH_AS(edited([](nlohmann::json& j) { j["added_tokens"][0]["lstrip"] = true; }),
                       doctest::Contains("strips the spaces beside it"), kiln::FileError);
}

TEST_CASE("the tokenizer reads merges as pairs, a prefix space and ignore_merges, as newer tokenizer.json files hold") {
  const auto tok = kiln::text::Tokenizer::from_pretrained(kDir);
  const auto pairs = edited([](nlohmann::json& j) {
    for (auto& m : j["model"]["merges"]) {
      const std::string s = m.get<std::string>();
      m = nlohmann::json::array({s.substr(0, s.find(' ')), s.substr(s.find(' ') + 1)});
    }
  });
  CHECK(pairs.encode("The lazy dog's owner") == tok.encode("The lazy dog's owner"));
  const auto prefixed = edited([](nlohmann::json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; });
  CHECK(prefixed.encode("Hello world") == tok.encode(" Hello world"));
  CHECK(prefixed.encode(" Hello") == tok.encode(" Hello"));
  // ignore_merges: a piece that is a token is that token, whatever the merges say.
  const auto no_merges = edited([](nlohmann::json& j) {
    j["model"]["merges"] = nlohmann::json::array();
    j["model"]["ignore_merges"] = true;
  });
  const auto hello = tok.encode(" Hello");
  REQUIRE(hello.size() == 1);
  CHECK(no_merges.encode(" Hello") == hello);
  CHECK(no_merges.encode(" Hellq").size() == 6);  // not a token: its 6 bytes
}
