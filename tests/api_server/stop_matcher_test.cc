// StopMatcher (an Aho-Corasick automaton) against the straightforward
// matcher it replaced, kept here as the reference: the same stop wins, the
// same text is emitted before it, and text is never released that the
// reference would still hold back for good reason.
#include "output/stop_matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

namespace sightline::api {
namespace {

// The matcher before the automaton: every stop string searched in the
// held-back text plus the delta on every Feed; the earliest start wins, ties
// by list order; holds back (longest stop - 1) bytes.
class ReferenceStopMatcher {
 public:
  explicit ReferenceStopMatcher(std::vector<std::string> stops) {
    for (auto& s : stops)
      if (!s.empty()) {
        holdback_ = std::max(holdback_, s.size() - 1);
        stops_.push_back(std::move(s));
      }
  }
  StopMatcher::Result Feed(std::string_view delta) {
    StopMatcher::Result r;
    buffer_.append(delta);
    std::size_t best = std::string::npos;
    for (const std::string& s : stops_) {
      const std::size_t at = buffer_.find(s);
      if (at < best) {
        best = at;
        r.stop = s;
      }
    }
    if (best != std::string::npos) {
      r.text = buffer_.substr(0, best);
      r.stopped = true;
      buffer_.clear();
      return r;
    }
    if (buffer_.size() > holdback_) {
      std::size_t cut = buffer_.size() - holdback_;
      while (cut > 0 && (static_cast<unsigned char>(buffer_[cut]) & 0xC0) == 0x80) --cut;
      r.text = buffer_.substr(0, cut);
      buffer_.erase(0, cut);
    }
    return r;
  }
  std::string Flush() {
    std::string rest;
    rest.swap(buffer_);
    return rest;
  }

 private:
  std::vector<std::string> stops_;
  std::size_t holdback_ = 0;
  std::string buffer_;
};

TEST(StopMatcher, EarliestStartWinsThenListOrder) {
  // "bc" ends first, but "abcd" starts first and both are in this delta.
  StopMatcher m({"bc", "abcd"});
  auto r = m.Feed("xabcdy");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop, "abcd");
  EXPECT_EQ(r.text, "x");
  // Same start: the one listed first, although it ends later.
  StopMatcher same({"abc", "ab"});
  r = same.Feed("zabc");
  EXPECT_EQ(r.stop, "abc");
  EXPECT_EQ(r.text, "z");
  // Across deltas, the one complete in an earlier delta wins.
  StopMatcher split({"abcd", "bc"});
  EXPECT_EQ(split.Feed("xab").text, "x");
  r = split.Feed("c");
  EXPECT_EQ(r.stop, "bc");
  EXPECT_EQ(r.text, "a");
}

TEST(StopMatcher, HoldsBackOnlyAPossibleStopStart) {
  StopMatcher m({"hello world"});
  // "hel" may start the stop; "xx" cannot, so it goes out at once (the old
  // matcher held back ten bytes whatever they were).
  EXPECT_EQ(m.Feed("xxhel").text, "xx");
  EXPECT_EQ(m.Feed("p").text, "help");
  EXPECT_EQ(m.Feed("hello wor").text, "");
  auto r = m.Feed("ld!");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.text, "");
}

TEST(StopMatcher, OneAutomatonManyChoices) {
  const auto stops = StopStrings::Compile({"end", "", "stop"});
  StopMatcher a(stops), b(stops);
  EXPECT_EQ(a.Feed("the en").text, "the ");
  EXPECT_EQ(b.Feed("to sto").text, "to ");
  auto ra = a.Feed("d");
  auto rb = b.Feed("ry");
  EXPECT_TRUE(ra.stopped);
  EXPECT_EQ(ra.stop, "end");
  EXPECT_FALSE(rb.stopped);
  EXPECT_EQ(rb.text, "story");
  EXPECT_TRUE(StopStrings::Compile({"", ""})->empty());
}

TEST(StopMatcher, ManyLongStopsStayCorrect) {
  std::vector<std::string> stops;
  for (int i = 0; i < 10000; ++i)
    stops.push_back("stop-" + std::to_string(i) + "-" + std::string(64, 'x'));
  stops.push_back("needle");
  StopMatcher m(stops);
  std::string out;
  for (int i = 0; i < 1000; ++i) out += m.Feed("stop-1-xxxx ").text;
  auto r = m.Feed("a needle");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop, "needle");
  EXPECT_EQ(out + r.text, [] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += "stop-1-xxxx ";
    return s + "a ";
  }());
}

// Random alphabets (ASCII and multi-byte characters), random stop sets
// (overlapping, nested, duplicated, empty), random texts cut into random
// deltas at character boundaries, as the detokenizer produces them. After a
// stop both matchers go on with fresh text, as Feed allows.
TEST(StopMatcher, AgreesWithReferenceOnRandomInputs) {
  const std::vector<std::vector<std::string>> alphabets = {{"a", "b"},
                                                           {"a", "b", "c"},
                                                           {"a", "\xC3\xA9", "\xE4\xB8\xAD"},
                                                           {"x", "\xF0\x9F\x98\x80", "y", "z"}};
  std::mt19937 rng(12345);
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  int stopped_cases = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    SCOPED_TRACE(iter);
    const auto& alpha = alphabets[pick(alphabets.size())];
    auto word = [&](std::size_t max_len) {
      std::string s;
      const std::size_t len = pick(max_len + 1);
      for (std::size_t k = 0; k < len; ++k) s += alpha[pick(alpha.size())];
      return s;
    };
    std::vector<std::string> stops;
    const std::size_t num_stops = 1 + pick(6);
    for (std::size_t k = 0; k < num_stops; ++k)
      stops.push_back(k > 0 && pick(5) == 0 ? stops[pick(k)] : word(5));
    StopMatcher fast(stops);
    ReferenceStopMatcher ref(stops);
    std::string fast_out, ref_out;
    const std::size_t deltas = pick(25);
    for (std::size_t d = 0; d < deltas; ++d) {
      const std::string delta = word(pick(4) == 0 ? 8 : 2);
      const auto rf = fast.Feed(delta);
      const auto rr = ref.Feed(delta);
      fast_out += rf.text;
      ref_out += rr.text;
      ASSERT_EQ(rf.stopped, rr.stopped) << "delta " << d;
      if (rr.stopped) {
        ++stopped_cases;
        ASSERT_EQ(rf.stop, rr.stop);
        ASSERT_EQ(fast_out, ref_out);
      } else {
        // Never releases what the reference holds for a possible stop, and
        // never holds back more.
        ASSERT_EQ(fast_out.compare(0, ref_out.size(), ref_out), 0);
        ASSERT_GE(fast_out.size(), ref_out.size());
      }
    }
    fast_out += fast.Flush();
    ref_out += ref.Flush();
    ASSERT_EQ(fast_out, ref_out);
  }
  EXPECT_GT(stopped_cases, 5000);  // the comparison exercised stops, not just text
}

TEST(StopMatcher, SpansChunksAndIsNotEmitted) {
  StopMatcher m({"world", "\n\n"});
  auto r = m.Feed("hello wor");
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.text, "hello ");  // "wor" could still become "world"
  r = m.Feed("ld and more");
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.stop, "world");
  EXPECT_EQ(r.text, "");
  StopMatcher earliest({"b", "a"});
  r = earliest.Feed("xxaxb");
  EXPECT_EQ(r.stop, "a");
  EXPECT_EQ(r.text, "xx");
  // A stop starting inside a character (not valid UTF-8 alone) still never
  // makes the matcher release half of one.
  StopMatcher none({"\xA9zz"});
  EXPECT_EQ(none.Feed("é").text, "");  // held back whole: never half a character
  EXPECT_EQ(none.Feed("é").text, "é");
  EXPECT_EQ(none.Flush(), "é");
  StopMatcher empty({""});
  EXPECT_EQ(empty.Feed("abc").text, "abc");
}

}  // namespace
}  // namespace sightline::api
