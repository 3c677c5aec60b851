// W3C trace context parsing, against the specification's examples and, over
// a generated corpus of near-miss headers, against a reference written
// another way (a regular expression with the specification's rules, as
// OpenTelemetry's Python propagator checks them).
#include "sightline/tracing/trace_context.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

namespace sightline::tracing {
namespace {

constexpr char kExample[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

// The reference: OpenTelemetry Python's pattern and its extra rules
// (ff is invalid, version 00 takes no more fields, ids not all zero), with
// a later version's extra fields any bytes, as the specification has them.
bool ReferenceValid(const std::string& h) {
  static const std::regex re(
      "^[ \\t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-[\\s\\S]*)?[ \\t]*$");
  std::smatch m;
  if (!std::regex_match(h, m, re)) return false;
  if (m[1] == "ff") return false;
  if (m[1] == "00" && m[5].matched) return false;
  if (m[2] == std::string(32, '0') || m[3] == std::string(16, '0')) return false;
  return true;
}

TEST(TraceContext, SpecificationExample) {
  auto c = ParseTraceparent(kExample, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  ASSERT_TRUE(c);
  EXPECT_EQ(ToHex(c->trace_id.data(), 16), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(ToHex(c->span_id.data(), 8), "00f067aa0ba902b7");
  EXPECT_EQ(c->flags, 1);
  EXPECT_TRUE(c->sampled());
  EXPECT_EQ(c->trace_state, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
  EXPECT_EQ(FormatTraceparent(*c), kExample);
  auto unsampled = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00");
  ASSERT_TRUE(unsampled);
  EXPECT_FALSE(unsampled->sampled());
}

TEST(TraceContext, MalformedHeadersAreIgnored) {
  for (const char* bad :
       {"", "00", "garbage", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01, "
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
    EXPECT_FALSE(ParseTraceparent(bad)) << bad;
  // A later version may carry more fields; the known ones are read.
  auto future = ParseTraceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what");
  ASSERT_TRUE(future);
  EXPECT_EQ(future->flags, 1);
}

TEST(TraceContext, MalformedTracestateIsDroppedAlone) {
  const std::string too_long = "k=" + std::string(600, 'a');
  for (const std::string& bad : std::vector<std::string>{
           "UPPER=1", "a=b=c", "=x", "k=", too_long, "k=\x7f", "1abc=x", "t@toolongsystemname=x"}) {
    auto c = ParseTraceparent(kExample, bad);
    ASSERT_TRUE(c) << bad;
    EXPECT_EQ(c->trace_state, "") << bad;
  }
  std::string many;
  for (int i = 0; i < 33; ++i) many += "k" + std::to_string(i) + "=v,";
  EXPECT_FALSE(ValidTracestate(many));
  for (const char* good : {"", "a=1", "a=1,,b=2 ", "tenant@sys=v", "0t@s=v", "k*/_-=va lue"})
    EXPECT_TRUE(ValidTracestate(good)) << good;
}

// Every header one edit away from valid ones (each position replaced by
// every byte, deleted, or given an extra byte; versions, suffixes, zero ids
// and white space), parsed as the reference parses it.
TEST(TraceContext, GeneratedCorpusAgreesWithReference) {
  std::vector<std::string> seeds = {kExample,
                                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
                                    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-x",
                                    "00-00000000000000000000000000000001-0000000000000001-ff"};
  std::set<std::string> corpus;
  for (const std::string& s : seeds) {
    corpus.insert(s);
    for (std::size_t i = 0; i <= s.size(); ++i) {
      if (i < s.size()) {
        corpus.insert(s.substr(0, i) + s.substr(i + 1));  // deleted
        corpus.insert(s.substr(0, i));                    // truncated
      }
      for (int b = 1; b < 256; ++b) {
        const char c = static_cast<char>(b);
        if (i < s.size()) {
          std::string r = s;
          r[i] = c;
          corpus.insert(r);  // replaced
        }
        corpus.insert(s.substr(0, i) + c + s.substr(i));  // inserted
      }
    }
  }
  for (const char* v : {"00", "01", "fe", "ff", "0f", "a0"})
    for (const char* tail : {"", "-", "-x", " ", "\t", "x"})
      for (const char* lead : {"", " ", "\t"})
        corpus.insert(std::string(lead) + v + std::string(kExample).substr(2) + tail);
  std::size_t valid = 0;
  for (const std::string& h : corpus) {
    const bool ours = ParseTraceparent(h).has_value();
    ASSERT_EQ(ours, ReferenceValid(h)) << "'" << h << "'";
    valid += ours;
  }
  EXPECT_GT(corpus.size(), 100000u);
  EXPECT_GT(valid, 1000u);  // the corpus tests both answers
}

TEST(TraceContext, NewIdsAreNonZeroAndDistinct) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const TraceId t = NewTraceId();
    const SpanId s = NewSpanId();
    EXPECT_TRUE(seen.insert(ToHex(t.data(), t.size())).second);
    EXPECT_NE(ToHex(s.data(), s.size()), std::string(16, '0'));
  }
}

}  // namespace
}  // namespace sightline::tracing
