// Speculative decoding, part 1 (issue 39): --speculative-config's JSON, and
// the n-gram proposer against the rule written the obvious way on a
// generated corpus, plus vLLM's own documented example. The engine does not
// use the proposer yet.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "spec/ngram_proposer.h"
#include "spec/speculative_config.h"

namespace sightline::engine {
namespace {

using Tokens = std::vector<std::int32_t>;

SpeculativeConfig Ngram(int k, int a, int b) {
  SpeculativeConfig c;
  c.num_speculative_tokens = k;
  c.prompt_lookup_min = a;
  c.prompt_lookup_max = b;
  return c;
}

TEST(SpeculativeConfig, ParsesVllmKeysAndDefaults) {
  SpeculativeConfig c;
  ASSERT_TRUE(ParseSpeculativeConfig("", &c).ok());
  EXPECT_FALSE(c.enabled());
  ASSERT_TRUE(ParseSpeculativeConfig(R"({"method": "ngram", "num_speculative_tokens": 4,
      "prompt_lookup_min": 2, "prompt_lookup_max": 7})",
                                     &c)
                  .ok());
  EXPECT_TRUE(c.enabled());
  EXPECT_EQ(c.num_speculative_tokens, 4);
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 7);
  // Each bound defaults to the other, both to 5.
  ASSERT_TRUE(ParseSpeculativeConfig(R"({"method":"ngram","num_speculative_tokens":3})", &c).ok());
  EXPECT_EQ(c.prompt_lookup_min, 5);
  EXPECT_EQ(c.prompt_lookup_max, 5);
  ASSERT_TRUE(ParseSpeculativeConfig(
                  R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":2})", &c)
                  .ok());
  EXPECT_EQ(c.prompt_lookup_min, 2);
  EXPECT_EQ(c.prompt_lookup_max, 2);
  ASSERT_TRUE(ParseSpeculativeConfig(
                  R"({"method":"[ngram]","num_speculative_tokens":128,"prompt_lookup_min":3})", &c)
                  .ok());
  EXPECT_EQ(c.prompt_lookup_min, 3);
  EXPECT_EQ(c.prompt_lookup_max, 3);
  EXPECT_EQ(c.num_speculative_tokens, 128);
  // null is "not given", as for the other JSON fields here.
  ASSERT_TRUE(ParseSpeculativeConfig(
                  R"({"method":"ngram","num_speculative_tokens":2,"prompt_lookup_min":null})", &c)
                  .ok());
  EXPECT_EQ(c.prompt_lookup_min, 5);
}

TEST(SpeculativeConfig, EveryBadConfigIsOneLineNamingTheKey) {
  const std::pair<const char*, const char*> bad[] = {
      {"{", "not valid JSON"},
      {"[]", "must be a JSON object"},
      {"5", "must be a JSON object"},
      {R"({"num_speculative_tokens": 3})", "\"method\" is required"},
      {R"({"method": "eagle", "num_speculative_tokens": 3})", "method \"eagle\" is not supported"},
      {R"({"method": 1, "num_speculative_tokens": 3})", "\"method\" is required"},
      {R"({"method": "ngram"})", "num_speculative_tokens is required"},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens must be"},
      {R"({"method": "ngram", "num_speculative_tokens": 129})", "num_speculative_tokens must be"},
      {R"({"method": "ngram", "num_speculative_tokens": -1})", "num_speculative_tokens must be"},
      {R"({"method": "ngram", "num_speculative_tokens": 2.5})",
       "num_speculative_tokens must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": "3"})",
       "num_speculative_tokens must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": true})",
       "num_speculative_tokens must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": 99999999999})",
       "num_speculative_tokens is out of range"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 0})",
       "prompt_lookup_min must be at least 1"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": -2})",
       "prompt_lookup_min must be at least 1"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 4,
          "prompt_lookup_max": 2})",
       "prompt_lookup_min (4) exceeds prompt_lookup_max (2)"},
      {R"({"method": "ngram", "num_speculative_tokens": 3, "model": "x"})",
       "unknown key \"model\""},
  };
  for (const auto& [text, why] : bad) {
    SpeculativeConfig c = Ngram(9, 9, 9);
    const Status s = ParseSpeculativeConfig(text, &c);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.message().rfind("--speculative-config: ", 0), 0u) << s.message();
    EXPECT_NE(s.message().find(why), std::string::npos) << text << " -> " << s.message();
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s.message();
    EXPECT_FALSE(c.enabled()) << text;  // nothing half-parsed is left
  }
}

// vLLM's rule written the obvious way: for n from B down to A, the earliest
// occurrence of the last n tokens that ends before the last token, and up to
// max_tokens of what followed it.
Tokens NaiveDrafts(const Tokens& t, const SpeculativeConfig& c, int max_tokens) {
  const int n = static_cast<int>(t.size());
  if (max_tokens <= 0) return {};
  for (int len = std::min(c.prompt_lookup_max, n - 1); len >= c.prompt_lookup_min; --len)
    for (int s = 0; s + len <= n - 1; ++s)
      if (std::equal(t.begin() + s, t.begin() + s + len, t.end() - len)) {
        const int from = s + len, to = std::min(n, from + max_tokens);
        return Tokens(t.begin() + from, t.begin() + to);
      }
  return {};
}

TEST(NgramProposer, VllmsDocumentedExample) {
  // vllm/v1/spec_decode/ngram_proposer.py: the last 3 tokens [4,2,3] match
  // nowhere; the last 2 [2,3] match at 1, followed by [4,2,3] (k = 4, only
  // three tokens follow).
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 3, 4, 2, 3}, Ngram(4, 2, 3), 4), (Tokens{4, 2, 3}));
}

TEST(NgramProposer, Examples) {
  // The suffix [1 2 3] occurs at 0: what followed it.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 3, 4, 1, 2, 3}, Ngram(2, 1, 3), 2), (Tokens{4, 1}));
  // Of several occurrences, the earliest (vLLM's choice).
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 7, 1, 2, 8, 1, 2}, Ngram(1, 2, 2), 1), (Tokens{7}));
  // A longer match wins over an earlier shorter one.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{3, 2, 7, 1, 2, 8, 1, 2}, Ngram(1, 1, 2), 1), (Tokens{8}));
  // Matches longer than B count as B long: then the earliest wins.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{9, 1, 2, 5, 8, 9, 1, 2, 6, 8, 9, 1, 2}, Ngram(1, 1, 2), 1),
            (Tokens{5}));
  // Up to the end of the text, overlapping the suffix.
  EXPECT_EQ(ProposeNgramDrafts(Tokens{7, 7, 7}, Ngram(5, 2, 2), 5), (Tokens{7}));
  EXPECT_EQ(ProposeNgramDrafts(Tokens{1, 2, 3, 1, 2}, Ngram(5, 2, 2), 5), (Tokens{3, 1, 2}));
  // No match of at least A tokens, or no room: none.
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{1, 2, 3}, Ngram(3, 1, 3), 3).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{5, 1, 2, 6, 1, 2}, Ngram(3, 3, 4), 3).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{1, 2, 1, 2}, Ngram(3, 1, 2), 0).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{}, Ngram(3, 1, 2), 3).empty());
  EXPECT_TRUE(ProposeNgramDrafts(Tokens{4}, Ngram(3, 1, 2), 3).empty());
}

TEST(NgramProposer, MatchesTheRuleOnAGeneratedCorpus) {
  std::mt19937 rng(20);
  int with_drafts = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const int vocab = 1 + static_cast<int>(rng() % 4);  // small vocabularies: many matches
    Tokens t(rng() % 40);
    for (auto& x : t) x = static_cast<std::int32_t>(rng() % static_cast<unsigned>(vocab));
    const int a = 1 + static_cast<int>(rng() % 5);
    const SpeculativeConfig c = Ngram(8, a, a + static_cast<int>(rng() % 5));
    const int max_tokens = static_cast<int>(rng() % 9);
    const Tokens got = ProposeNgramDrafts(t, c, max_tokens);
    ASSERT_EQ(got, NaiveDrafts(t, c, max_tokens))
        << "trial " << trial << " A=" << c.prompt_lookup_min << " B=" << c.prompt_lookup_max;
    with_drafts += !got.empty();
  }
  EXPECT_GT(with_drafts, 5000);  // the corpus exercises matches, not only misses
}

// A long context: the rule on text that repeats a span, where the brute force
// is still affordable (the last 5 tokens recur every 97 tokens).
TEST(NgramProposer, ALongRepeatingContextDraftsWhatFollowedTheFirstOccurrence) {
  Tokens t;
  for (int i = 0; i < 20000; ++i) t.push_back(static_cast<std::int32_t>(i % 97));
  const SpeculativeConfig c = Ngram(4, 2, 5);
  const Tokens got = ProposeNgramDrafts(t, c, 4);
  EXPECT_EQ(got, NaiveDrafts(t, c, 4));
  const std::int32_t next = static_cast<std::int32_t>(20000 % 97);
  EXPECT_EQ(got, (Tokens{next, next + 1, next + 2, next + 3}));
}

}  // namespace
}  // namespace sightline::engine
