// Hugging Face byte-level BPE from a tokenizer.json written here: GPT-2's
// byte map, merges by rank within pre-tokens only, added/special tokens,
// Split(Regex) sequences, BOS/EOS from tokenizer_config.json, refusals.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "sightline/api_server/detokenizer.h"
#include "sightline/api_server/tokenizer.h"
#include "support/scrape.h"

namespace sightline::api {
namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode, written independently of the tokenizer's own.
std::string ByteChar(int b) {
  int extra = 0;
  for (int x = 0; x < b; ++x)
    if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174)) ++extra;
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  const unsigned cp = printable ? static_cast<unsigned>(b) : 256u + static_cast<unsigned>(extra);
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

class BpeTokenizerTest : public ::testing::Test {
 protected:
  BpeTokenizerTest()
      : dir_(std::filesystem::temp_directory_path() / sightline::testing::UniqueInstance()) {
    std::filesystem::create_directories(dir_);
    // Ids 0-255: the bytes; then merged tokens; then added tokens.
    for (int b = 0; b < 256; ++b) vocab_[ByteChar(b)] = b;
    vocab_["he"] = 256;
    vocab_[ByteChar(' ') + "t"] = 257;
    vocab_[ByteChar(' ') + "the"] = 258;
    vocab_["12"] = 259;
  }
  ~BpeTokenizerTest() override { std::filesystem::remove_all(dir_); }

  json Spec(json pre_tokenizer) const {
    return {
        {"version", "1.0"},
        {"normalizer", nullptr},
        {"pre_tokenizer", std::move(pre_tokenizer)},
        {"decoder", {{"type", "ByteLevel"}}},
        {"added_tokens",
         {{{"id", 260}, {"content", "<|eot|>"}, {"special", true}},
          {{"id", 261}, {"content", "<s>"}, {"special", true}},
          {{"id", 262}, {"content", "<|tool|>"}, {"special", false}}}},
        {"model",
         {{"type", "BPE"},
          {"vocab", vocab_},
          // "h e" before "Ġt he": rank order decides; pairs as strings and as lists.
          {"merges", {"h e", json::array({ByteChar(' '), "t"}), ByteChar(' ') + "t he", "1 2"}}}}};
  }
  Status Load(const json& spec, std::unique_ptr<Tokenizer>* out) {
    std::ofstream(dir_ / "tokenizer.json") << spec.dump();
    return LoadHfTokenizer((dir_ / "tokenizer.json").string(), out);
  }
  std::unique_ptr<Tokenizer> Gpt2() {
    std::unique_ptr<Tokenizer> t;
    const Status s = Load(Spec({{"type", "ByteLevel"}, {"add_prefix_space", false}}), &t);
    EXPECT_TRUE(s.ok()) << s.message();
    return t;
  }

  std::filesystem::path dir_;
  json vocab_ = json::object();
};

TEST_F(BpeTokenizerTest, MergesByRankWithinPreTokens) {
  auto t = Gpt2();
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 263);
  EXPECT_EQ(t->Encode(" the", false), (std::vector<std::int32_t>{258}));
  EXPECT_EQ(t->Encode("the", false), (std::vector<std::int32_t>{'t', 256}));
  // GPT-2's regex splits "the the" into "the" and " the": no merge across.
  EXPECT_EQ(t->Encode("the the", false), (std::vector<std::int32_t>{'t', 256, 258}));
  // Bytes that are not printable map to their own characters and back.
  EXPECT_EQ(t->Encode("\n\t", false), (std::vector<std::int32_t>{'\n', '\t'}));
  for (const std::string text : {"héllo wörld 😀 the end", "a\r\n  b\xc3", "tab\tthe  12 ¡¬®"}) {
    EXPECT_EQ(t->Decode(t->Encode(text, false), DecodeOptions{.skip_special_tokens = false}), text);
  }
}

TEST_F(BpeTokenizerTest, AddedTokensAreMatchedWholeAndSpecialOnesSkippable) {
  auto t = Gpt2();
  ASSERT_TRUE(t);
  const std::vector<std::int32_t> ids = t->Encode("<s>he<|eot|><|tool|>", false);
  EXPECT_EQ(ids, (std::vector<std::int32_t>{261, 256, 260, 262}));
  EXPECT_TRUE(t->is_special(260));
  EXPECT_FALSE(t->is_special(262));
  EXPECT_FALSE(t->is_special(256));
  EXPECT_EQ(t->Decode(ids, DecodeOptions{.skip_special_tokens = false}), "<s>he<|eot|><|tool|>");
  EXPECT_EQ(t->Decode(ids, DecodeOptions{}), "he<|tool|>");
  EXPECT_EQ(t->bos_id(), -1);  // no tokenizer_config.json
}

TEST_F(BpeTokenizerTest, StreamsMultiByteCharactersWhole) {
  auto t = Gpt2();
  ASSERT_TRUE(t);
  const std::string text = "ü😀 the €";
  IncrementalDetokenizer d(t.get(), DecodeOptions{});
  std::string streamed;
  for (std::int32_t id : t->Encode(text, false)) {
    const std::string piece = d.Add(id);
    std::size_t pending = 0;
    EXPECT_EQ(ValidUtf8Prefix(piece, false, &pending), piece) << piece;  // whole characters only
    streamed += piece;
  }
  streamed += d.Flush();
  EXPECT_EQ(streamed, text);
}

TEST_F(BpeTokenizerTest, SplitSequencesAndSpecialTokensFromTheConfig) {
  // Llama 3's shape: Split(Regex, Isolated) then ByteLevel without its regex.
  const json pre = {{"type", "Sequence"},
                    {"pretokenizers",
                     {{{"type", "Split"},
                       {"pattern", {{"Regex", "\\p{N}{1,3}"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"use_regex", false}}}}};
  std::ofstream(dir_ / "tokenizer_config.json")
      << json{{"bos_token", "<s>"}, {"eos_token", {{"content", "<|eot|>"}}}}.dump();
  std::unique_ptr<Tokenizer> t;
  ASSERT_TRUE(Load(Spec(pre), &t).ok());
  // "12312" splits into "123" and "12"; "12" merges in each, never across.
  EXPECT_EQ(t->Encode("12312", false), (std::vector<std::int32_t>{259, '3', 259}));
  // No GPT-2 regex here: " the" stays one pre-token with the word before it.
  EXPECT_EQ(t->Encode("x the", false), (std::vector<std::int32_t>{'x', 258}));
  EXPECT_EQ(t->bos_id(), 261);
  EXPECT_EQ(t->eos_id(), 260);
}

TEST_F(BpeTokenizerTest, RefusesWhatItCannotReproduce) {
  std::unique_ptr<Tokenizer> t;
  json spec = Spec({{"type", "ByteLevel"}});
  spec["normalizer"] = {{"type", "NFC"}};
  EXPECT_NE(Load(spec, &t).message().find("normalizers are not supported"), std::string::npos);
  spec = Spec({{"type", "Whitespace"}});
  EXPECT_NE(Load(spec, &t).message().find("pre_tokenizer 'Whitespace'"), std::string::npos);
  spec = Spec({{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}});
  EXPECT_NE(Load(spec, &t).message().find("Isolated"), std::string::npos);
  spec = Spec({{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}});
  EXPECT_NE(Load(spec, &t).message().find("regex"), std::string::npos);
  spec = Spec({{"type", "ByteLevel"}});
  spec["model"]["merges"].push_back("x y");  // "xy" is not in the vocabulary
  EXPECT_NE(Load(spec, &t).message().find("merge 'x y'"), std::string::npos);
  spec = Spec(nullptr);
  spec["model"]["type"] = "WordPiece";
  EXPECT_NE(Load(spec, &t).message().find("BPE"), std::string::npos);
  std::ofstream(dir_ / "tokenizer.json") << "{not json";
  EXPECT_FALSE(LoadHfTokenizer((dir_ / "tokenizer.json").string(), &t).ok());
  EXPECT_FALSE(LoadHfTokenizer((dir_ / "missing.json").string(), &t).ok());
}

// The textbook algorithm, quadratic: merge the leftmost pair of lowest rank
// until none is left. The tokenizer must agree with it on every word.
std::vector<std::string> NaiveBpe(const std::string& word,
                                  const std::vector<std::pair<std::string, std::string>>& merges) {
  std::vector<std::string> symbols;
  for (char c : word) symbols.emplace_back(1, c);
  for (;;) {
    std::size_t best = merges.size(), where = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i)
      for (std::size_t r = 0; r < best; ++r)
        if (merges[r].first == symbols[i] && merges[r].second == symbols[i + 1]) {
          best = r;
          where = i;
          break;
        }
    if (best == merges.size()) return symbols;
    symbols[where] += symbols[where + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(where) + 1);
  }
}

TEST_F(BpeTokenizerTest, MergesAgreeWithTheTextbookAlgorithmAndScaleToHugeWords) {
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"},  {"b", "a"},   {"a", "a"},  {"ab", "a"},   {"aa", "aa"}, {"b", "b"},
      {"aa", "b"}, {"ba", "ab"}, {"bb", "b"}, {"aaaa", "a"}, {"ab", "ab"}};
  json spec = Spec({{"type", "ByteLevel"}, {"add_prefix_space", false}});
  spec["model"]["merges"] = json::array();
  int next_id = 300;
  for (const auto& [a, b] : merges) {
    spec["model"]["merges"].push_back(a + " " + b);
    if (!spec["model"]["vocab"].contains(a + b)) spec["model"]["vocab"][a + b] = next_id++;
  }
  std::unique_ptr<Tokenizer> t;
  const Status s = Load(spec, &t);
  ASSERT_TRUE(s.ok()) << s.message();
  std::mt19937 rng(4);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string word;
    for (std::size_t n = 1 + rng() % 24; word.size() < n;) word += "ab"[rng() % 2];
    std::vector<std::int32_t> want;
    for (const std::string& sym : NaiveBpe(word, merges))
      want.push_back(spec["model"]["vocab"][sym].get<std::int32_t>());
    ASSERT_EQ(t->Encode(word, false), want) << word;
  }
  // One pre-token of 400,000 letters: "ab" pairs become "abab" (rank 10)
  // only after no lower rank applies anywhere.
  std::string huge;
  for (int i = 0; i < 200000; ++i) huge += "ab";
  const std::vector<std::int32_t> ids = t->Encode(huge, false);
  ASSERT_EQ(ids.size(), 100000u);
  EXPECT_EQ(ids.front(), spec["model"]["vocab"]["abab"].get<std::int32_t>());
  EXPECT_EQ(t->Decode(ids, DecodeOptions{.skip_special_tokens = false}), huge);
}

}  // namespace
}  // namespace sightline::api
