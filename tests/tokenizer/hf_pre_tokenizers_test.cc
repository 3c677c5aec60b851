// The hf/ pre-tokenizers and regex engine against Hugging Face `tokenizers`
// (npm 0.23.2): every configuration of testdata/hf_components.json on every
// input, at the start of the input and after an added token; every code point
// (testdata/hf_unicode_digests.json); the Unicode cases Oniguruma decides; and
// each refusal. Regenerate the data with tools/testdata/tokenizer_reference/components.mjs
// (and --exhaustive).
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "hf/components.h"
#include "hf/pre_tokenizers.h"
#include "hf/regex.h"
#include "hf/unicode.h"
#include "tokenizer/hf_codepoints.h"

namespace sightline::hf {
namespace {

using nlohmann::json;
using Pieces = std::vector<std::string>;

const json& PreTokenizerReference() {
  static const json data = [] {
    std::ifstream in(std::string(SIGHTLINE_SOURCE_TESTDATA) + "/hf_components.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str());
  }();
  return data;
}

Pieces PreTokenized(const json& config, const Pieces& in, bool starts_input = true) {
  std::unique_ptr<PreTokenizer> p;
  const Status s = MakePreTokenizer(config, &p);
  EXPECT_TRUE(s.ok()) << config.dump() << ": " << s.message();
  Pieces pieces = in;
  if (p) p->PreTokenize(&pieces, starts_input);
  return pieces;
}

TEST(HfPreTokenizersTest, MatchesTokenizersOnEveryInput) {
  const json& ref = PreTokenizerReference();
  const json& inputs = ref.at("inputs");
  ASSERT_GE(ref.at("pre_tokenizers").size(), 50u);
  int exact = 0, total = 0;
  for (const json& c : ref.at("pre_tokenizers")) {
    std::unique_ptr<PreTokenizer> p;
    const Status s = MakePreTokenizer(c.at("config"), &p);
    ASSERT_TRUE(s.ok()) << c.at("config").dump() << ": " << s.message();
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string in = inputs[i].get<std::string>();
      for (bool starts_input : {true, false}) {
        // After an added token the caller passes the segment that follows
        // it, which for "" does not exist.
        Pieces got = starts_input || !in.empty() ? Pieces{in} : Pieces{};
        p->PreTokenize(&got, starts_input);
        const Pieces want = c.at(starts_input ? "pieces" : "after_added")[i].get<Pieces>();
        ++total;
        if (got == want) ++exact;
        EXPECT_EQ(got, want) << c.at("config").dump() << " on " << json(in).dump()
                             << (starts_input ? "" : " after an added token");
      }
    }
  }
  std::cout << "pre-tokenizers: " << exact << "/" << total << " exact\n";
}

// Every code point through each Unicode-dependent pre-tokenizer (predicates,
// \p{..}, \d, \w, \b spelled out for Oniguruma) against the reference.
TEST(HfPreTokenizersTest, MatchesTokenizersOnEveryCodepoint) {
  const json& ref = Digests();
  const std::size_t size = ref.at("chunk_size").get<std::size_t>();
  const std::vector<std::string> chunks = AllCodepointChunks(size, "", "");
  ASSERT_GE(ref.at("pre_tokenizers").size(), 8u);
  for (const json& c : ref.at("pre_tokenizers")) {
    std::unique_ptr<PreTokenizer> p;
    ASSERT_TRUE(MakePreTokenizer(c.at("config"), &p).ok());
    ASSERT_EQ(c.at("chunks").size(), chunks.size());
    for (std::size_t i = 0; i < chunks.size(); ++i) {
      Pieces pieces = {chunks[i]};
      p->PreTokenize(&pieces, true);
      std::string joined;
      for (std::size_t k = 0; k < pieces.size(); ++k)
        joined += (k ? std::string(1, '\0') : "") + pieces[k];
      EXPECT_EQ(Fnv1a(joined), c.at("chunks")[i].get<std::uint32_t>())
          << c.at("config").dump() << " on code points " << i * size + 1 << "...";
    }
  }
}

TEST(HfPreTokenizersTest, MetaspaceFirstPrependsOnlyWhereTheInputStarts) {
  const json first = {{"type", "Metaspace"},
                      {"replacement", "\xE2\x96\x81"},
                      {"prepend_scheme", "first"},
                      {"split", false}};
  EXPECT_EQ(PreTokenized(first, {"hi there", "again"}),
            (Pieces{"\xE2\x96\x81hi\xE2\x96\x81there", "again"}));
  EXPECT_EQ(PreTokenized(first, {"hi"}, false), (Pieces{"hi"}));
  // A delimiter removed before it moves the piece off offset 0.
  const json seq = {{"type", "Sequence"},
                    {"pretokenizers", {{{"type", "WhitespaceSplit"}}, first}}};
  EXPECT_EQ(PreTokenized(seq, {"  hi you"}), (Pieces{"hi", "you"}));
  EXPECT_EQ(PreTokenized(seq, {"hi you"}), (Pieces{"\xE2\x96\x81hi", "you"}));
}

TEST(HfPreTokenizersTest, TellsWhereMetaspaceFirstFollowsASplit) {
  const json first = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "first"}};
  const json always = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "always"}};
  const json split = {{"type", "WhitespaceSplit"}};
  const json bytes = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
  auto seq = [](std::vector<json> items) {
    return json{{"type", "Sequence"}, {"pretokenizers", json(items)}};
  };
  EXPECT_FALSE(MetaspaceFirstAfterSplit(first));
  EXPECT_FALSE(MetaspaceFirstAfterSplit(seq({first, split})));
  EXPECT_FALSE(MetaspaceFirstAfterSplit(seq({bytes, first})));
  EXPECT_FALSE(MetaspaceFirstAfterSplit(seq({split, always})));
  EXPECT_TRUE(MetaspaceFirstAfterSplit(seq({split, first})));
  EXPECT_TRUE(MetaspaceFirstAfterSplit(seq({seq({split}), seq({first})})));
  EXPECT_TRUE(MetaspaceFirstAfterSplit(seq({always, first})));  // always splits by default
}

TEST(HfPreTokenizersTest, ByteLevelAlphabetIsGpt2s) {
  const auto& a = ByteLevelAlphabet();
  EXPECT_EQ(a[' '], "\xC4\xA0");   // Ġ
  EXPECT_EQ(a['\n'], "\xC4\x8A");  // Ċ
  EXPECT_EQ(a['A'], "A");
  EXPECT_EQ(a[0xAD], "\xC5\x83");  // the last non-printable byte: U+0143
  EXPECT_EQ(a[0xFF], "\xC3\xBF");
}

std::vector<std::string> Matches(std::string_view pattern, std::string_view text) {
  std::unique_ptr<Regex> re;
  const Status s = Regex::Compile(pattern, &re);
  EXPECT_TRUE(s.ok()) << s.message();
  std::vector<std::string> out;
  if (!re) return out;
  for (const Span& sp : re->FindMatches(text))
    out.push_back((sp.is_match ? "+" : "-") +
                  std::string(text.substr(sp.begin, sp.end - sp.begin)));
  return out;
}

TEST(HfRegexTest, UnicodeClassesAreOnigurumas) {
  // U+11F04 (Kawi, Unicode 15) is a letter, U+1E4F0 (Nag Mundari digit) a
  // number; U+180E is not whitespace (PCRE2 10.42 got all three wrong).
  EXPECT_EQ(Matches(R"(\p{L}+)", "a\xF0\x91\xBC\x84"),
            (std::vector<std::string>{"+a\xF0\x91\xBC\x84"}));
  EXPECT_EQ(Matches(R"(\p{N}+)", "\xF0\x9E\x93\xB0"),
            (std::vector<std::string>{"+\xF0\x9E\x93\xB0"}));
  EXPECT_EQ(Matches(R"(\s+)",
                    "a\xE1\xA0\x8E"
                    "b"),
            (std::vector<std::string>{"-a\xE1\xA0\x8E"
                                      "b"}));
  EXPECT_EQ(Matches(R"(\s+)",
                    "a\xC2\xA0"
                    "b"),
            (std::vector<std::string>{"-a", "+\xC2\xA0", "-b"}));
}

TEST(HfRegexTest, SyntaxOfTokenizerPatterns) {
  EXPECT_EQ(Matches(R"((?i:'s|'ll))", "IT'S WE'LL"),
            (std::vector<std::string>{"-IT", "+'S", "- WE", "+'LL"}));
  EXPECT_EQ(Matches(R"(\s+(?!\S)|\s+)", "a   b"),
            (std::vector<std::string>{"-a", "+  ", "+ ", "-b"}));
  EXPECT_EQ(Matches(R"(a++b)", "aaab"), (std::vector<std::string>{"+aaab"}));
  EXPECT_EQ(Matches(R"(\p{N}{1,3})", "12345"), (std::vector<std::string>{"+123", "+45"}));
}

TEST(HfRegexTest, EmptyMatchesFollowTheOnigCrate) {
  // An empty match right after a non-empty one is skipped; others are kept.
  EXPECT_EQ(Matches("x*", "axxb"), (std::vector<std::string>{"+", "-a", "+xx", "-b", "+"}));
  EXPECT_EQ(Matches("x*", ""), (std::vector<std::string>{"-"}));
}

TEST(HfRegexTest, LiteralsAreEscapedAsRustsRegexEscape) {
  std::unique_ptr<Regex> re;
  ASSERT_TRUE(Regex::CompileLiteral(R"(a.b*(c)[d]{e}|f^g$h#i&j-k~l\m+n?)", &re).ok());
  const std::string text = R"(xa.b*(c)[d]{e}|f^g$h#i&j-k~l\m+n?y)";
  const std::vector<Span> spans = re->FindMatches(text);
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_TRUE(spans[1].is_match);
  EXPECT_EQ(spans[1].begin, 1u);
  EXPECT_EQ(spans[1].end, text.size() - 1);
}

TEST(HfRegexTest, SplitBehaviors) {
  // "a-b--c" split on "-": the five behaviors of NormalizedString::split.
  const std::string text = "a-b--c";
  const std::vector<Span> spans = FindMatchesOf(text, U'-');
  auto pieces = [&](SplitBehavior b) {
    std::vector<std::string> out;
    for (const auto& [x, y] : SplitSpans(spans, b)) out.push_back(text.substr(x, y - x));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(SplitBehavior::kRemoved), (V{"a", "b", "c"}));
  EXPECT_EQ(pieces(SplitBehavior::kIsolated), (V{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(pieces(SplitBehavior::kMergedWithPrevious), (V{"a-", "b-", "-", "c"}));
  EXPECT_EQ(pieces(SplitBehavior::kMergedWithNext), (V{"a", "-b", "-", "-c"}));
  EXPECT_EQ(pieces(SplitBehavior::kContiguous), (V{"a", "-", "b", "--", "c"}));
  SplitBehavior b;
  EXPECT_FALSE(ParseSplitBehavior("Merged", &b).ok());
}

void ExpectPreTokenizerRefused(const json& config, const std::string& needle) {
  std::unique_ptr<PreTokenizer> p;
  const Status s = MakePreTokenizer(config, &p);
  EXPECT_FALSE(s.ok()) << config.dump();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
  EXPECT_EQ(p, nullptr);
}

TEST(HfPreTokenizersTest, RefusesWhatItCannotReproduce) {
  ExpectPreTokenizerRefused({{"type", "UnicodeScripts"}},
                            "pre-tokenizer 'UnicodeScripts' is not supported");
  ExpectPreTokenizerRefused({{"type", "Fancy"}}, "pre-tokenizer 'Fancy' is not supported");
  ExpectPreTokenizerRefused({{"add_prefix_space", true}}, "pre-tokenizer without a 'type'");
  ExpectPreTokenizerRefused({{"type", "ByteLevel"}, {"trim_offsets", true}},
                            "missing 'add_prefix_space'");
  ExpectPreTokenizerRefused({{"type", "Split"},
                             {"pattern", {{"Regex", "[a-"}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            "pre-tokenizer 'Split': regex '[a-' does not compile");
  ExpectPreTokenizerRefused({{"type", "Split"},
                             {"pattern", {{"Glob", "*"}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            "'pattern' is neither");
  ExpectPreTokenizerRefused({{"type", "Split"},
                             {"pattern", {{"String", " "}}},
                             {"behavior", "Merged"},
                             {"invert", false}},
                            "split behavior 'Merged' is not supported");
  ExpectPreTokenizerRefused(
      {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}},
      "missing 'invert'");
  ExpectPreTokenizerRefused({{"type", "Split"}, {"pattern", {{"String", " "}}}, {"invert", false}},
                            "missing 'behavior'");
  ExpectPreTokenizerRefused({{"type", "Punctuation"}, {"behavior", "Sideways"}},
                            "split behavior 'Sideways' is not supported");
  ExpectPreTokenizerRefused({{"type", "Metaspace"}, {"replacement", "ab"}},
                            "'replacement' is not a single character");
  ExpectPreTokenizerRefused({{"type", "Metaspace"}}, "missing 'replacement'");
  ExpectPreTokenizerRefused(
      {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}},
      "prepend_scheme '\"sometimes\"' is not supported");
  // As `tokenizers`: add_prefix_space false contradicts the default "always".
  ExpectPreTokenizerRefused(
      {{"type", "Metaspace"}, {"replacement", "_"}, {"add_prefix_space", false}},
      "add_prefix_space does not match declared prepend_scheme");
  ExpectPreTokenizerRefused({{"type", "CharDelimiterSplit"}, {"delimiter", ""}},
                            "not a single character");
  ExpectPreTokenizerRefused({{"type", "FixedLength"}, {"length", 0}},
                            "'length' must be a positive integer");
  ExpectPreTokenizerRefused({{"type", "Sequence"}}, "missing 'pretokenizers'");
  ExpectPreTokenizerRefused(
      {{"type", "Sequence"},
       {"pretokenizers", {{{"type", "Whitespace"}}, {{"type", "UnicodeScripts"}}}}},
      "pre-tokenizer 'UnicodeScripts' is not supported");
}

TEST(HfPreTokenizersTest, InvalidUtf8IsMadeValidFirst) {
  const json ws = {{"type", "WhitespaceSplit"}};
  EXPECT_EQ(PreTokenized(ws, {"a\xFF b"}), (Pieces{"a\xEF\xBF\xBD", "b"}));
}

}  // namespace
}  // namespace sightline::hf
