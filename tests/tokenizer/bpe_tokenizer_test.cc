// Hugging Face tokenizer.json pipelines (LoadHfTokenizer): the hand-written
// files of testdata/hand_written/tokenizers.json replayed against what the
// reference (`tokenizers` 0.23.2, tools/testdata/tokenizer_reference/hand_written.mjs)
// encoded and decoded with them; merges against the textbook algorithm and
// on a huge word; BOS/EOS from the template and tokenizer_config.json;
// streaming; and every refusal.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "sightline/tokenizer/detokenizer.h"
#include "sightline/tokenizer/tokenizer.h"
#include "support/scrape.h"

namespace sightline {
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
    for (int b = 0; b < 256; ++b) vocab_[ByteChar(b)] = b;
    vocab_["he"] = 256;
    vocab_[ByteChar(' ') + "t"] = 257;
    vocab_[ByteChar(' ') + "the"] = 258;
    vocab_["12"] = 259;
  }
  ~BpeTokenizerTest() override { std::filesystem::remove_all(dir_); }

  // A GPT-2-shaped file: ids 0-255 the bytes, merged tokens, added tokens.
  json Spec(json pre_tokenizer) const {
    return {{"version", "1.0"},
            {"normalizer", nullptr},
            {"pre_tokenizer", std::move(pre_tokenizer)},
            {"decoder", {{"type", "ByteLevel"}}},
            {"added_tokens",
             {{{"id", 260}, {"content", "<|eot|>"}, {"special", true}, {"normalized", false}},
              {{"id", 261}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
              {{"id", 262}, {"content", "<|tool|>"}, {"special", false}, {"normalized", false}}}},
            {"model",
             {{"type", "BPE"},
              {"vocab", vocab_},
              {"merges", {"h e", ByteChar(' ') + " t", ByteChar(' ') + "t he", "1 2"}}}}};
  }
  Status Load(const json& spec, std::unique_ptr<Tokenizer>* out, const json& config = nullptr) {
    std::ofstream(dir_ / "tokenizer.json") << spec.dump();
    if (!config.is_null()) std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
    return LoadHfTokenizer((dir_ / "tokenizer.json").string(), out);
  }
  std::string Refusal(const json& spec) {
    std::unique_ptr<Tokenizer> t;
    const Status s = Load(spec, &t);
    EXPECT_FALSE(s.ok()) << spec.dump().substr(0, 200);
    return s.message();
  }

  void ExpectRefusal(const json& spec, const std::string& words) {
    const std::string message = Refusal(spec);
    EXPECT_NE(message.find(words), std::string::npos) << message;
  }

  std::filesystem::path dir_;
  json vocab_ = json::object();
};

// Every hand-written case, encode and decode, equal to the reference.
TEST_F(BpeTokenizerTest, HandWrittenFilesMatchTheReference) {
  std::ifstream in(std::string(SIGHTLINE_SOURCE_TESTDATA) + "/hand_written/tokenizers.json");
  ASSERT_TRUE(in);
  const json all = json::parse(in);
  int encodes = 0, decodes = 0;
  for (const json& c : all.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    std::unique_ptr<Tokenizer> t;
    const Status s = Load(c.at("tokenizer"), &t);
    ASSERT_TRUE(s.ok()) << s.message();
    for (const json& e : c.at("encode")) {
      const std::string text = e.at("text");
      EXPECT_EQ(t->Encode(text, e.at("add_special_tokens").get<bool>()),
                e.at("ids").get<std::vector<std::int32_t>>())
          << "'" << text << "' add_special_tokens=" << e.at("add_special_tokens");
      ++encodes;
    }
    for (const json& d : c.at("decode")) {
      const auto ids = d.at("ids").get<std::vector<std::int32_t>>();
      EXPECT_EQ(t->Decode(ids, DecodeOptions{.skip_special_tokens = d.at("skip_special_tokens")}),
                d.at("text").get<std::string>())
          << d.at("ids").dump() << " skip=" << d.at("skip_special_tokens");
      ++decodes;
    }
  }
  EXPECT_GT(encodes, 250);
  EXPECT_GT(decodes, 300);
}

TEST_F(BpeTokenizerTest, MergesByRankWithinPreTokens) {
  std::unique_ptr<Tokenizer> t;
  ASSERT_TRUE(Load(Spec({{"type", "ByteLevel"}, {"add_prefix_space", false}}), &t).ok());
  EXPECT_EQ(t->vocab_size(), 263);
  EXPECT_EQ(t->Encode(" the", false), (std::vector<std::int32_t>{258}));
  EXPECT_EQ(t->Encode("the the", false), (std::vector<std::int32_t>{'t', 256, 258}));
  for (const std::string text : {"héllo wörld 😀 the end", "a\r\n  b", "tab\tthe  12 ¡¬®"})
    EXPECT_EQ(t->Decode(t->Encode(text, false), DecodeOptions{.skip_special_tokens = false}), text);
  // Invalid UTF-8 in: encoded as its lossy conversion (U+FFFD), as a caller
  // of the Rust library must pass it.
  EXPECT_EQ(t->Decode(t->Encode("a\xc3", false), DecodeOptions{}), "a\xEF\xBF\xBD");
  EXPECT_TRUE(t->is_special(260));
  EXPECT_FALSE(t->is_special(262));
  EXPECT_FALSE(t->is_special(256));
  EXPECT_EQ(t->bos_id(), -1);  // no config, no template
  EXPECT_EQ(t->eos_id(), -1);
  EXPECT_EQ(t->bos_token(), "");
}

TEST_F(BpeTokenizerTest, StreamsMultiByteCharactersWhole) {
  std::unique_ptr<Tokenizer> t;
  ASSERT_TRUE(Load(Spec({{"type", "ByteLevel"}, {"add_prefix_space", false}}), &t).ok());
  const std::string text = "ü😀 the €";
  IncrementalDetokenizer d(t.get(), DecodeOptions{});
  std::string streamed;
  for (std::int32_t id : t->Encode(text, false)) {
    const std::string piece = d.Add(id);
    std::size_t pending = 0;
    EXPECT_EQ(ValidUtf8Prefix(piece, false, &pending), piece) << piece;
    streamed += piece;
  }
  streamed += d.Flush();
  EXPECT_EQ(streamed, text);
}

TEST_F(BpeTokenizerTest, BosAndEosFromTheTemplateOrTheConfig) {
  json spec = Spec({{"type", "ByteLevel"}, {"add_prefix_space", false}});
  spec["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", "<s> $A <|eot|>"},  // the string form
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {261}}, {"tokens", {"<s>"}}}},
        {"<|eot|>", {{"id", "<|eot|>"}, {"ids", {260}}, {"tokens", {"<|eot|>"}}}}}}};
  std::unique_ptr<Tokenizer> t;
  ASSERT_TRUE(Load(spec, &t).ok());
  EXPECT_EQ(t->bos_id(), 261);
  EXPECT_EQ(t->eos_id(), 260);
  EXPECT_EQ(t->bos_token(), "<s>");
  EXPECT_EQ(t->Encode("he", true), (std::vector<std::int32_t>{261, 256, 260}));
  EXPECT_EQ(t->Encode("he", false), (std::vector<std::int32_t>{256}));
  // tokenizer_config.json wins: bos as a string, eos as {"content": ...}.
  ASSERT_TRUE(
      Load(spec, &t, {{"bos_token", "<|tool|>"}, {"eos_token", {{"content", "<s>"}}}}).ok());
  EXPECT_EQ(t->bos_id(), 262);
  EXPECT_EQ(t->eos_id(), 261);
  EXPECT_EQ(t->eos_token(), "<s>");
  // A null there means none (Qwen's bos_token).
  ASSERT_TRUE(Load(spec, &t, {{"bos_token", nullptr}}).ok());
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_EQ(t->eos_id(), 260);
}

TEST_F(BpeTokenizerTest, RefusesWhatItCannotReproduce) {
  const json ok = Spec({{"type", "ByteLevel"}, {"add_prefix_space", false}});
  json spec = ok;
  spec["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  ExpectRefusal(spec, "normalizer 'Precompiled' is not supported");
  spec = Spec({{"type", "UnicodeScripts"}});
  ExpectRefusal(spec, "UnicodeScripts");
  for (const char* type : {"Unigram", "WordLevel"}) {
    spec = ok;
    spec["model"]["type"] = type;
    ExpectRefusal(spec, std::string("model '") + type + "' is not supported");
  }
  spec = ok;
  spec["model"]["dropout"] = 0.1;
  ExpectRefusal(spec, "dropout");
  spec = ok;
  spec["model"]["merges"].push_back("x y");  // "xy" is not in the vocabulary
  ExpectRefusal(spec, "merge 'x y'");
  spec = ok;
  spec["model"]["merges"].push_back(json::array({"h", "e"}));  // serde: all strings or all pairs
  ExpectRefusal(spec, "mix strings and pairs");
  spec = ok;
  spec["model"]["merges"].push_back("h e x");
  ExpectRefusal(spec, "not two tokens");
  spec = ok;
  spec["model"]["unk_token"] = "<unk>";
  ExpectRefusal(spec, "unk_token '<unk>'");
  spec = ok;
  spec["decoder"] = {{"type", "CTC"}, {"pad_token", "<pad>"}};
  ExpectRefusal(spec, "decoder 'CTC' is not supported");
  spec = ok;
  spec["post_processor"] = {{"type", "Nope"}};
  ExpectRefusal(spec, "post_processor 'Nope' is not supported");
  spec = ok;
  spec["post_processor"] = {{"type", "TemplateProcessing"},
                            {"single", {{{"SpecialToken", {{"id", "<x>"}, {"type_id", 0}}}}}},
                            {"special_tokens", json::object()}};
  ExpectRefusal(spec, "missing special token '<x>'");
  spec["post_processor"]["single"] = "$B";
  ExpectRefusal(spec, "sequence B");
  spec = ok;
  spec["version"] = "2.0";
  ExpectRefusal(spec, "version");
  // An added token that normalizes to nothing, and two that match the same
  // text: the Rust trie builder fails on both.
  spec = ok;
  spec["normalizer"] = {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}};
  spec["added_tokens"].push_back({{"id", 263}, {"content", " "}, {"normalized", true}});
  ExpectRefusal(spec, "normalizes to the empty string");
  spec = ok;
  spec["normalizer"] = {{"type", "Lowercase"}};
  spec["added_tokens"].push_back({{"id", 263}, {"content", "AB"}, {"normalized", true}});
  spec["added_tokens"].push_back({{"id", 264}, {"content", "ab"}, {"normalized", true}});
  ExpectRefusal(spec, "match the same text 'ab'");
  std::unique_ptr<Tokenizer> t;
  std::ofstream(dir_ / "tokenizer.json") << "{not json";
  EXPECT_FALSE(LoadHfTokenizer((dir_ / "tokenizer.json").string(), &t).ok());
  EXPECT_EQ(LoadHfTokenizer((dir_ / "missing.json").string(), &t).code(), Status::Code::kNotFound);
}

// The remaining malformed-file refusals, one per check.
TEST_F(BpeTokenizerTest, RefusesMalformedComponents) {
  const json ok = Spec({{"type", "ByteLevel"}, {"add_prefix_space", false}});
  const auto with = [&](const char* key, json value) {
    json spec = ok;
    spec[key] = std::move(value);
    return spec;
  };
  const auto model = [&](const char* key, json value) {
    json spec = ok;
    if (value.is_null())
      spec["model"].erase(key);
    else
      spec["model"][key] = std::move(value);
    return spec;
  };
  ExpectRefusal(model("type", nullptr), "model has no type");
  ExpectRefusal(model("merges", nullptr), "missing vocab/merges");
  ExpectRefusal(model("fuse_unk", "yes"), "wrong type");
  ExpectRefusal(model("vocab", {{"a", -1}}), "not a valid id");
  json prefixed = model("continuing_subword_prefix", "###");
  prefixed["model"]["merges"] = {"h e"};
  ExpectRefusal(prefixed, "shorter than the prefix");
  json wordpiece = ok;
  wordpiece["model"] = {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}};
  ExpectRefusal(wordpiece, "WordPiece unk_token '[UNK]' is not in the vocabulary");
  wordpiece["model"].erase("vocab");
  ExpectRefusal(wordpiece, "WordPiece model: missing vocab");
  json spec = ok;
  spec.erase("model");
  ExpectRefusal(spec, "no model");
  ExpectRefusal(with("added_tokens", "<s>"), "added_tokens: not a list");
  const json specials = {{"<s>", {{"id", "<s>"}, {"ids", {261}}, {"tokens", {"<s>"}}}}};
  ExpectRefusal(with("post_processor", {{"single", "$A"}}), "post_processor without a type");
  ExpectRefusal(with("post_processor", {{"type", "TemplateProcessing"}}),
                "missing single template");
  ExpectRefusal(with("post_processor", {{"type", "TemplateProcessing"}, {"single", 3}}),
                "single template is not a list");
  ExpectRefusal(
      with("post_processor",
           {{"type", "TemplateProcessing"}, {"single", {"$X"}}, {"special_tokens", specials}}),
      "cannot build piece '$X'");
  ExpectRefusal(with("post_processor", {{"type", "TemplateProcessing"},
                                        {"single", {{{"Other", 1}}}},
                                        {"special_tokens", specials}}),
                "bad piece");
  ExpectRefusal(with("post_processor", {{"type", "BertProcessing"}, {"cls", {"[CLS]", 0}}}),
                "cls and sep must be [token, id]");
  ExpectRefusal(with("post_processor", {{"type", "Sequence"}}), "missing processors");
  ExpectRefusal(
      with("post_processor", {{"type", "Sequence"}, {"processors", {{{"type", "Nope"}}}}}),
      "post_processor 'Nope' is not supported");
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
  spec["added_tokens"] = json::array();
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
}  // namespace sightline
