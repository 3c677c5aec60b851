// tokenizer.json decoders (hf/decoders.cc) on their own: each decode_chain's
// exact output, U+FFFD placement included, and each refusal. Expected values
// are what `tokenizers` 0.23.2 gives (the decoder_* cases of
// testdata/hand_written/tokenizers.json, where the whole pipeline is
// replayed, and the Rust sources' own tests).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hf/components.h"

namespace sightline::hf {
namespace {

using nlohmann::json;

std::string Decode(const json& spec, std::vector<std::string> tokens) {
  std::unique_ptr<Decoder> d;
  const Status s = MakeDecoder(spec, &d);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!d) return "<refused>";
  d->DecodeChain(&tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::string Refusal(const json& spec) {
  std::unique_ptr<Decoder> d;
  const Status s = MakeDecoder(spec, &d);
  EXPECT_FALSE(s.ok()) << spec.dump();
  return s.message();
}

const char kFffd[] = "\xEF\xBF\xBD";

TEST(HfDecodersTest, ByteLevelIsLossyUtf8OverAllTokens) {
  const json bl = {{"type", "ByteLevel"}};
  // 0xF0 0x9F 0x98 is one maximal invalid subsequence: one U+FFFD.
  EXPECT_EQ(Decode(bl, {"ð", "Ł", "ĺ", "A"}), std::string(kFffd) + "A");
  // ÿ þ = 0xFF 0xFE (each invalid on its own), then a cut-off 0xC3.
  EXPECT_EQ(Decode(bl, {"ÿ", "þ", "A", "Ã"}), std::string(kFffd) + kFffd + "A" + kFffd);
  // A multi-byte character split over two tokens is joined first.
  EXPECT_EQ(Decode(bl, {"Ã", "©"}), "é");
  // A token with a character outside the byte alphabet passes as it is.
  EXPECT_EQ(Decode(bl, {"Ġhi", "<|eot|>", "€"}), " hi<|eot|>€");
}

TEST(HfDecodersTest, ByteFallbackGivesOneReplacementPerByteOfAnInvalidRun) {
  const json bf = {{"type", "ByteFallback"}};
  EXPECT_EQ(Decode(bf, {"<0xE2>", "<0x82>", "<0xAC>", "x"}), "€x");
  EXPECT_EQ(Decode(bf, {"<0xF0>", "<0x9F>", "a", "<0xE2>"}),
            std::string(kFffd) + kFffd + "a" + kFffd);
  // u8::from_str_radix takes "+4"; "ZZ" is not a byte and stays a token.
  EXPECT_EQ(Decode(bf, {"<0x41>", "<0x+4>", "<0xZZ>", "end"}), "A\x04<0xZZ>end");
}

TEST(HfDecodersTest, MetaspaceDropsEveryReplacementOfTheFirstTokenUnlessNever) {
  const json first = {{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "first"}};
  EXPECT_EQ(Decode(first, {"▁▁hi", "a▁b"}), "hia b");
  json never = first;
  never["prepend_scheme"] = "never";
  EXPECT_EQ(Decode(never, {"▁▁hi", "a▁b"}), "  hia b");
  // The legacy add_prefix_space: true means prepending.
  EXPECT_EQ(Decode({{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", true}},
                   {"▁x", "▁y"}),
            "x y");
}

TEST(HfDecodersTest, StripReplaceFuseAndSequence) {
  EXPECT_EQ(
      Decode({{"type", "Strip"}, {"content", "_"}, {"start", 2}, {"stop", 1}}, {"__a__", "x--y"}),
      "a_x--y");
  // start longer than the token: it stops at its end.
  EXPECT_EQ(Decode({{"type", "Strip"}, {"content", "▁"}, {"start", 5}, {"stop", 0}}, {"▁▁hi", "▁"}),
            "hi");
  EXPECT_EQ(Decode({{"type", "Replace"}, {"pattern", {{"Regex", "-+|_"}}}, {"content", " "}},
                   {"x--y", "__a__"}),
            "x y  a  ");
  EXPECT_EQ(
      Decode({{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}}, {"▁a▁", "b"}),
      " a b");
  // Llama 2's chain: Replace, ByteFallback, Fuse, Strip one leading space.
  const json llama2 = {{"type", "Sequence"},
                       {"decoders",
                        {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                         {{"type", "ByteFallback"}},
                         {{"type", "Fuse"}},
                         {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  EXPECT_EQ(Decode(llama2, {"▁hello", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>", "▁world"}),
            "hello😀 world");
  EXPECT_EQ(Decode({{"type", "Fuse"}}, {"a", "b", "c"}), "abc");
}

TEST(HfDecodersTest, WordPieceAndBpeSuffix) {
  EXPECT_EQ(Decode({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}},
                   {"hello", "##s", ",", "do", "not", "##n", "'", "t", "."}),
            "hellos, do notn ' t.");
  EXPECT_EQ(
      Decode({{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", false}}, {"a", ".", "##b"}),
      "a .b");
  EXPECT_EQ(
      Decode({{"type", "BPEDecoder"}, {"suffix", "</w>"}}, {"hel", "lo</w>", "wor", "ld</w>"}),
      "hello world");
}

TEST(HfDecodersTest, RefusesWhatItCannotReproduce) {
  EXPECT_NE(Refusal({{"type", "CTC"}}).find("decoder 'CTC' is not supported"), std::string::npos);
  EXPECT_NE(Refusal({{"type", "Sequence"}, {"decoders", {{{"type", "Mystery"}}}}})
                .find("decoder 'Mystery' is not supported"),
            std::string::npos);
  EXPECT_NE(Refusal({{"replacement", "▁"}}).find("without a type"), std::string::npos);
  EXPECT_NE(Refusal({{"type", "Metaspace"}, {"replacement", "▁"}, {"add_prefix_space", false}})
                .find("add_prefix_space does not match"),
            std::string::npos);
  EXPECT_NE(Refusal({{"type", "Metaspace"}, {"replacement", "ab"}}).find("one character"),
            std::string::npos);
  EXPECT_NE(Refusal({{"type", "Metaspace"}, {"replacement", "▁"}, {"prepend_scheme", "sometimes"}})
                .find("prepend_scheme 'sometimes'"),
            std::string::npos);
  EXPECT_NE(Refusal({{"type", "Strip"}, {"content", ""}}).find("one character"), std::string::npos);
  EXPECT_NE(Refusal({{"type", "Replace"}, {"content", " "}}).find("missing pattern"),
            std::string::npos);
  EXPECT_FALSE(
      Refusal({{"type", "Replace"}, {"pattern", {{"Regex", "(unclosed"}}}, {"content", ""}})
          .empty());
  EXPECT_NE(Refusal({{"type", "Sequence"}}).find("missing decoders"), std::string::npos);
}

}  // namespace
}  // namespace sightline::hf
