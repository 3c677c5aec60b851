// Tokenizers, UTF-8-safe incremental detokenization and stop strings.
#include <gtest/gtest.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "sightline/tokenizer/detokenizer.h"
#include "sightline/tokenizer/tokenizer.h"
#include "support/scrape.h"

namespace sightline {
namespace {

bool IsWellFormedUtf8(const std::string& s) {
  std::size_t pending = 0;
  return ValidUtf8Prefix(s, false, &pending) == s && pending == 0;
}

// Streams `ids` token by token; every delta must be valid UTF-8 on its own.
std::string Stream(const Tokenizer& t, const std::vector<std::int32_t>& ids,
                   int* deltas = nullptr) {
  IncrementalDetokenizer d(&t, DecodeOptions{});
  std::string out;
  for (std::int32_t id : ids) {
    const std::string delta = d.Add(id);
    EXPECT_TRUE(IsWellFormedUtf8(delta)) << "broken UTF-8 in a delta";
    if (deltas && !delta.empty()) ++*deltas;
    out += delta;
  }
  const std::string rest = d.Flush();
  EXPECT_TRUE(IsWellFormedUtf8(rest));
  return out + rest;
}

TEST(ByteTokenizer, RoundTripAndSpecials) {
  auto t = MakeByteTokenizer();
  const std::string text = "héllo 世界 🎉\n";
  const auto ids = t->Encode(text, false);
  EXPECT_EQ(ids.size(), text.size());  // one token per byte
  EXPECT_EQ(t->Decode(ids, DecodeOptions{}), text);
  std::vector<std::int32_t> with_special = {t->bos_id(), 'h', 'i', t->eos_id()};
  EXPECT_EQ(t->Decode(with_special, DecodeOptions{}), "hi");
  EXPECT_EQ(t->Decode(with_special, DecodeOptions{.skip_special_tokens = false}), "<s>hi</s>");
  EXPECT_TRUE(t->is_special(257));
  EXPECT_FALSE(t->is_special('a'));
  EXPECT_EQ(t->vocab_size(), 260);
}

TEST(Utf8, ValidPrefixPendingAndReplacement) {
  std::size_t pending = 0;
  EXPECT_EQ(ValidUtf8Prefix("a\xC3\xA9", false, &pending), "a\xC3\xA9");
  EXPECT_EQ(pending, 0u);
  EXPECT_EQ(ValidUtf8Prefix("a\xE4\xB8", false, &pending), "a");  // 世 cut after 2 of 3 bytes
  EXPECT_EQ(pending, 2u);
  EXPECT_EQ(ValidUtf8Prefix("a\xE4\xB8", true, &pending), "a\xEF\xBF\xBD");
  EXPECT_EQ(ValidUtf8Prefix("\xFF"
                            "b",
                            false, &pending),
            "\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(ValidUtf8Prefix("\xC0\x80", false, &pending), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong
  EXPECT_EQ(ValidUtf8Prefix("\xED\xA0\x80", false, &pending).substr(0, 3),
            "\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(ValidUtf8Prefix("\xF4\x90\x80\x80", false, &pending).substr(0, 3),
            "\xEF\xBF\xBD");  // > U+10FFFF
  EXPECT_EQ(ValidUtf8Prefix("\xC3"
                            "a",
                            false, &pending),
            "\xEF\xBF\xBD"
            "a");  // broken, not pending
}

TEST(IncrementalDetokenizer, NeverSplitsACharacter) {
  auto t = MakeByteTokenizer();
  const std::string text = "héllo 世界 🎉 end";
  int deltas = 0;
  EXPECT_EQ(Stream(*t, t->Encode(text, false), &deltas), text);
  EXPECT_LT(deltas, static_cast<int>(text.size()));  // multi-byte characters came out whole
  // Garbage bytes from a model become U+FFFD instead of stalling the stream.
  const std::vector<std::int32_t> garbage = {'a', 0xFF, 0xC3, 'b', 0xE4, 0xB8};
  EXPECT_EQ(Stream(*t, garbage),
            "a\xEF\xBF\xBD\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
}

// The issue's example, and where maximal subparts differ from "one U+FFFD
// per bad byte": a truncated 4-byte prefix broken by 'A' is one U+FFFD.
TEST(Utf8, MaximalSubparts) {
  EXPECT_EQ(LossyUtf8("\xF0\x9F\x98"
                      "A"),
            "\xEF\xBF\xBD"
            "A");
  EXPECT_EQ(LossyUtf8("\xE4\xB8\xE4\xB8\x96"), "\xEF\xBF\xBD\xE4\xB8\x96");
  EXPECT_EQ(LossyUtf8("\xF4\x90\x80\x80"),  // F4 90 starts nothing: each byte alone
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  std::size_t pending = 0;
  EXPECT_EQ(ValidUtf8Prefix("\xF0\x9F\x98", false, &pending), "");
  EXPECT_EQ(pending, 3u);
  EXPECT_EQ(ValidUtf8Prefix("\xF0\x9F\x98", true, &pending), "\xEF\xBF\xBD");
}

// Byte sequences and the text Python's bytes.decode("utf-8", "replace")
// makes of them (tools/testdata/utf8_reference/): the full conversion, and the same
// bytes streamed one token at a time through the byte tokenizer, with and
// without special tokens between them, must both give that text.
TEST(Utf8, MatchesPythonReference) {
  std::ifstream in(SIGHTLINE_SOURCE_TESTDATA "/utf8_lossy.json");
  ASSERT_TRUE(in) << "missing " SIGHTLINE_SOURCE_TESTDATA "/utf8_lossy.json";
  const auto doc = nlohmann::json::parse(in);
  const auto& cases = doc.at("cases");
  ASSERT_GE(cases.size(), 300u);
  auto t = MakeByteTokenizer();
  int mismatches = 0;
  for (const auto& c : cases) {
    std::string bytes;
    std::vector<std::int32_t> ids, with_specials;
    for (int b : c.at("bytes")) {
      bytes.push_back(static_cast<char>(b));
      ids.push_back(b);
      with_specials.push_back(b);
      if (b % 3 == 0) with_specials.push_back(t->eos_id());  // skipped: invisible
    }
    const std::string expected = c.at("text").get<std::string>();
    const std::string lossy = LossyUtf8(bytes);
    EXPECT_EQ(lossy, expected) << c.dump();
    EXPECT_EQ(Stream(*t, ids), expected) << c.dump();
    EXPECT_EQ(Stream(*t, with_specials), expected) << c.dump();
    mismatches += lossy != expected;
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size();
}

// Streamed text equals the non-streamed text for every id sequence: random
// ids (mostly bytes >= 0x80, so every kind of broken and truncated sequence
// occurs, plus specials), with special tokens shown and skipped; and every
// prefix of the stream is a prefix of the final text (nothing is taken back).
TEST(IncrementalDetokenizer, StreamedEqualsFullDecodeRandomized) {
  auto t = MakeByteTokenizer();
  std::mt19937 rng(15);
  std::uniform_int_distribution<int> kind(0, 9), high(0x80, 0xFF), any(0, 259), len(0, 40);
  for (int round = 0; round < 4000; ++round) {
    std::vector<std::int32_t> ids;
    const int n = len(rng);
    for (int i = 0; i < n; ++i) {
      const int k = kind(rng);
      ids.push_back(k < 6 ? high(rng) : k < 8 ? any(rng) : 'a' + k);
    }
    for (const bool skip : {true, false}) {
      const DecodeOptions options{.skip_special_tokens = skip};
      const std::string expected = LossyUtf8(t->Decode(ids, options));
      IncrementalDetokenizer d(t.get(), options);
      std::string out;
      for (std::int32_t id : ids) {
        out += d.Add(id);
        ASSERT_EQ(expected.compare(0, out.size(), out), 0) << "round " << round;
      }
      out += d.Flush();
      ASSERT_EQ(out, expected) << "round " << round << " skip " << skip;
      ASSERT_TRUE(IsWellFormedUtf8(out));
    }
  }
}

// Hugging Face's ByteFallback decoder as tokenizers implements it: ids
// 0x80..0xFF are byte tokens <0xNN>; a run of them becomes its text if valid
// UTF-8, else one U+FFFD per byte of the whole run. Ids from 256 are words
// ("w256 "...), 300 is a special token shown as "<|x|>" (skipped ones are
// dropped before decoding, as tokenizers does). Its Decode is text
// already (never raw bytes), and not concatenative: a bad byte spoils the
// characters before it in its run.
class ByteFallbackTokenizer final : public Tokenizer {
 public:
  std::vector<std::int32_t> Encode(std::string_view, bool) const override { return {}; }
  std::string Decode(std::span<const std::int32_t> ids, const DecodeOptions& o) const override {
    std::string out, run;
    auto end_run = [&] {
      if (LossyUtf8(run) == run)
        out += run;
      else
        for (std::size_t i = 0; i < run.size(); ++i) out += "\xEF\xBF\xBD";
      run.clear();
    };
    for (std::int32_t id : ids) {
      if (id == 300 && o.skip_special_tokens) continue;  // dropped first: runs join
      if (id < 256) {
        run.push_back(static_cast<char>(id));
        continue;
      }
      end_run();
      if (id == 300) {
        out += "<|x|>";
      } else {
        out += "w" + std::to_string(id) + " ";
      }
    }
    end_run();
    return out;
  }
  int vocab_size() const override { return 301; }
  std::int32_t bos_id() const override { return -1; }
  std::int32_t eos_id() const override { return 300; }
  std::string bos_token() const override { return ""; }
  std::string eos_token() const override { return "<|x|>"; }
  bool is_special(std::int32_t id) const override { return id == 300; }
};

// Streamed equals the full decode for the byte-fallback decoder too, though
// a run's text can change when a bad byte joins it: the detokenizer holds a
// run back until a token of another kind ends it.
TEST(IncrementalDetokenizer, StreamedEqualsFullDecodeWithByteFallbackRuns) {
  const ByteFallbackTokenizer t;
  std::mt19937 rng(15);
  std::uniform_int_distribution<int> kind(0, 9), high(0x80, 0xFF), word(256, 260), len(0, 30);
  const std::string e9 = "\xC3\xA9";  // é as two byte tokens
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::int32_t> ids;
    const int n = len(rng);
    for (int i = 0; i < n; ++i) {
      const int k = kind(rng);
      if (k < 3) {
        ids.insert(ids.end(), {0xC3, 0xA9});  // a valid character a later byte may spoil
      } else if (k < 7) {
        ids.push_back(high(rng));
      } else {
        ids.push_back(k == 9 ? 300 : word(rng));
      }
    }
    for (const bool skip : {true, false}) {
      const DecodeOptions options{.skip_special_tokens = skip};
      const std::string expected = t.Decode(ids, options);
      IncrementalDetokenizer d(&t, options);
      std::string out;
      for (std::int32_t id : ids) {
        out += d.Add(id);
        ASSERT_EQ(expected.compare(0, out.size(), out), 0) << "round " << round;
      }
      out += d.Flush();
      ASSERT_EQ(out, expected) << "round " << round << " skip " << skip;
    }
  }
  // The case itself: é decoded, then a bad byte turns the run into U+FFFDs.
  EXPECT_EQ(t.Decode(std::vector<std::int32_t>{0xC3, 0xA9, 0xFF}, DecodeOptions{}),
            "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(Stream(t, {0xC3, 0xA9, 0xFF, 256}), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBDw256 ");
  EXPECT_EQ(Stream(t, {0xC3, 0xA9, 256}), e9 + "w256 ");
}

class SentencePieceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = "/tmp/" + std::string("sp-") + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream corpus(dir_ + "/corpus.txt");
    for (int i = 0; i < 200; ++i)
      corpus << "the quick brown fox jumps over the lazy dog " << i << "\n"
             << "hello world, streaming tokens with metrics you can trust\n"
             << "café naïve résumé\n";
    corpus.close();
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + dir_ + "/corpus.txt --model_prefix=" + dir_ +
        "/tok --vocab_size=320 --byte_fallback=true --character_coverage=1.0 --minloglevel=2");
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  static void TearDownTestSuite() { std::filesystem::remove_all(dir_); }
  static std::string dir_;
};
std::string SentencePieceTest::dir_;

TEST_F(SentencePieceTest, RoundTripByteFallbackAndStreaming) {
  std::unique_ptr<Tokenizer> t;
  ASSERT_TRUE(LoadSentencePieceTokenizer(dir_ + "/tok.model", &t).ok());
  EXPECT_EQ(t->vocab_size(), 320);
  const std::string text = "hello world, the lazy fox 世界 🎉 café";
  const auto ids = t->Encode(text, false);
  EXPECT_EQ(t->Decode(ids, DecodeOptions{}), text);  // unseen characters survive via byte fallback
  EXPECT_EQ(Stream(*t, ids), text);
  std::unique_ptr<Tokenizer> missing;
  EXPECT_FALSE(LoadSentencePieceTokenizer(dir_ + "/nope.model", &missing).ok());
}

}  // namespace
}  // namespace sightline
