// The hf/ normalizers against Hugging Face `tokenizers` (npm 0.23.2): every
// configuration of testdata/hf_components.json on every input, exactly; every
// code point (testdata/hf_unicode_digests.json); and each refusal. Regenerate
// the data with tools/testdata/tokenizer_reference/components.mjs (and --exhaustive).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hf/components.h"
#include "hf/unicode.h"
#include "tokenizer/hf_codepoints.h"

namespace sightline::hf {
namespace {

using nlohmann::json;

const json& NormalizerReference() {
  static const json data = [] {
    std::ifstream in(std::string(SIGHTLINE_SOURCE_TESTDATA) + "/hf_components.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str());
  }();
  return data;
}

std::string Normalized(const json& config, std::string_view text) {
  std::unique_ptr<Normalizer> n;
  const Status s = MakeNormalizer(config, &n);
  EXPECT_TRUE(s.ok()) << s.message();
  return n ? n->Normalize(text) : "";
}

TEST(HfNormalizersTest, MatchesTokenizersOnEveryInput) {
  const json& ref = NormalizerReference();
  const json& inputs = ref.at("inputs");
  ASSERT_GE(inputs.size(), 60u);
  ASSERT_GE(ref.at("normalizers").size(), 20u);
  int exact = 0, total = 0;
  for (const json& c : ref.at("normalizers")) {
    std::unique_ptr<Normalizer> n;
    const Status s = MakeNormalizer(c.at("config"), &n);
    ASSERT_TRUE(s.ok()) << c.at("config").dump() << ": " << s.message();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string in = inputs[i].get<std::string>();
      const std::string want = c.at("outputs")[i].get<std::string>();
      const std::string got = n->Normalize(in);
      ++total;
      if (got == want) ++exact;
      EXPECT_EQ(got, want) << c.at("config").dump() << " on " << json(in).dump();
    }
  }
  std::cout << "normalizers: " << exact << "/" << total << " exact\n";
}

// Every code point, alone and between "a\u0301" and "\u0323", through each
// normalizer: the Unicode versions of unicode.cc's tables against the
// reference's, everywhere.
TEST(HfNormalizersTest, MatchesTokenizersOnEveryCodepoint) {
  const json& ref = Digests();
  const std::size_t size = ref.at("chunk_size").get<std::size_t>();
  const std::vector<std::string> chunks = AllCodepointChunks(size, "", "");
  const std::vector<std::string> pairs = AllCodepointChunks(size, "a\xCC\x81", "\xCC\xA3");
  ASSERT_GE(ref.at("normalizers").size(), 6u);
  for (const json& c : ref.at("normalizers")) {
    std::unique_ptr<Normalizer> n;
    ASSERT_TRUE(MakeNormalizer(c.at("config"), &n).ok());
    ASSERT_EQ(c.at("chunks").size(), chunks.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      EXPECT_EQ(Fnv1a(n->Normalize(chunks[i])), c.at("chunks")[i].get<std::uint32_t>())
          << c.at("config").dump() << " on code points " << i * size + 1 << "...";
      EXPECT_EQ(Fnv1a(n->Normalize(pairs[i])), c.at("pairs")[i].get<std::uint32_t>())
          << c.at("config").dump() << " on a\u0301 + code points " << i * size + 1
          << "... + U+0323";
    }
  }
}

TEST(HfNormalizersTest, LowercaseUsesFullMappingsWithoutContext) {
  const json lower = {{"type", "Lowercase"}};
  EXPECT_EQ(Normalized(lower, "\xC4\xB0"), "i\xCC\x87");                 // U+0130 -> i + U+0307
  EXPECT_EQ(Normalized(lower, "\xCE\xA3\xCE\xA3"), "\xCF\x83\xCF\x83");  // no final sigma
  // Unicode 16 (Garay) and 17 mappings, newer than utf8proc's tables.
  EXPECT_EQ(Normalized(lower, "\xF0\x90\xB5\x90"), "\xF0\x90\xB5\xB0");  // U+10D50 -> U+10D70
}

TEST(HfNormalizersTest, NormalFormsFollowUnicode9) {
  const json nfd = {{"type", "NFD"}};
  // U+0301 (ccc 230) then U+1E4EE (Nag Mundari, Unicode 15, ccc 220): the
  // Unicode 9 tables of `tokenizers` do not know the mark, so no reordering.
  EXPECT_EQ(Normalized(nfd, "a\xCC\x81\xF0\x9E\x93\xAE"), "a\xCC\x81\xF0\x9E\x93\xAE");
  EXPECT_EQ(Normalized(nfd, "\xC3\xA9"), "e\xCC\x81");
  EXPECT_EQ(Normalized({{"type", "NFC"}}, "e\xCC\x81"), "\xC3\xA9");
  EXPECT_EQ(Normalized({{"type", "NFKC"}}, "\xEF\xAC\x81"), "fi");
}

TEST(HfNormalizersTest, InvalidUtf8BecomesReplacementCharacters) {
  // One U+FFFD per maximal invalid subsequence, as from_utf8_lossy.
  EXPECT_EQ(Normalized({{"type", "NFC"}},
                       "a\xF0\x9F\x98"
                       "b\xFF"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(Normalized({{"type", "Prepend"}, {"prepend", "_"}}, "\xC3"), "_\xEF\xBF\xBD");
}

void ExpectNormalizerRefused(const json& config, const std::string& needle) {
  std::unique_ptr<Normalizer> n;
  const Status s = MakeNormalizer(config, &n);
  EXPECT_FALSE(s.ok()) << config.dump();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_EQ(n, nullptr);
}

TEST(HfNormalizersTest, RefusesWhatItCannotReproduce) {
  ExpectNormalizerRefused({{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}},
                          "normalizer 'Precompiled' is not supported");
  ExpectNormalizerRefused({{"type", "BertNormalizer"},
                           {"clean_text", true},
                           {"handle_chinese_chars", true},
                           {"strip_accents", nullptr},
                           {"lowercase", true}},
                          "normalizer 'BertNormalizer' is not supported");
  ExpectNormalizerRefused({{"type", "Fancy"}}, "normalizer 'Fancy' is not supported");
  ExpectNormalizerRefused({{"strip_left", true}}, "normalizer without a 'type'");
  ExpectNormalizerRefused(json::array(), "normalizer without a 'type'");
  ExpectNormalizerRefused({{"type", "Strip"}, {"strip_left", true}}, "missing 'strip_right'");
  ExpectNormalizerRefused({{"type", "Strip"}, {"strip_left", 1}, {"strip_right", true}},
                          "'strip_left' is not a boolean");
  ExpectNormalizerRefused({{"type", "Prepend"}}, "normalizer 'Prepend': missing 'prepend'");
  ExpectNormalizerRefused({{"type", "Replace"}, {"pattern", {{"String", " "}}}},
                          "missing 'content'");
  ExpectNormalizerRefused({{"type", "Replace"}, {"pattern", " "}, {"content", "_"}},
                          "'pattern' is neither");
  ExpectNormalizerRefused(
      {{"type", "Replace"}, {"pattern", {{"Regex", "(unclosed"}}}, {"content", "_"}},
      "regex '(unclosed' does not compile");
  ExpectNormalizerRefused({{"type", "Sequence"}}, "missing 'normalizers'");
  ExpectNormalizerRefused(
      {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Precompiled"}}}}},
      "normalizer 'Precompiled' is not supported");
}

}  // namespace
}  // namespace sightline::hf
