// EventTemplate: the streamed events it fills are byte for byte what
// rendering the whole object gives, for any text (escapes, UTF-8, quotes).
#include "output/event_template.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "http/http_protocol.h"
#include "output/openai_render.h"
#include "output/responses_format.h"

namespace sightline::api {
namespace {

using nlohmann::json;

TEST(EventTemplate, FilledEventsEqualFullRenderings) {
  auto object = [](const json& text) {
    return "data: " +
           json{{"id", "cmpl-1"}, {"choices", {{{"index", 0}, {"text", text}}}}, {"created", 7}}
               .dump() +
           "\n\n";
  };
  EventTemplate t;
  ASSERT_TRUE(t.Make(object(EventTemplate::Placeholder(0)), 1));
  for (const std::string text :
       {"a", " world", "\"quoted\"", "back\\slash", "new\nline\ttab", "é", "😀", "\x01\x1f", ""})
    EXPECT_EQ(t.Fill({EventTemplate::Quote(text)}), object(text)) << text;
}

// Quote is written by hand for the token path; nlohmann's dump() is the
// reference, over every string of one and two bytes and a generated corpus
// of longer ones from an alphabet of escapes, ASCII, UTF-8 lead and
// continuation bytes: the same bytes, or both refuse (not UTF-8).
TEST(EventTemplate, QuoteIsNlohmannsDumpOverAGeneratedCorpus) {
  // The edges of well-formed UTF-8 (Unicode Table 3-7), on both sides.
  std::vector<std::string> corpus = {"\xE0\xA0\x80",     "\xE0\x9F\xBF",     "\xF4\x8F\xBF\xBF",
                                     "\xF4\x90\x80\x80", "\xF0\x8F\xBF\xBF", "\xF0\x90\x80\x80",
                                     "\xED\x9F\xBF",     "\xED\xA0\x80",     "\xEF\xBF\xBF",
                                     "\xC2\x80",         "\xC1\xBF",         "\xDF\xBF"};
  for (int a = 0; a < 256; ++a) {
    corpus.push_back(std::string(1, static_cast<char>(a)));
    for (int b = 0; b < 256; ++b) corpus.push_back({static_cast<char>(a), static_cast<char>(b)});
  }
  const std::string alphabet =
      "a\"\\\n\x01\x1f\x7f\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xed\xa0\xc0\xf4\x90";
  std::uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (int k = 0, n = 3 + i % 10; k < n; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;  // xorshift
      s += alphabet[x % alphabet.size()];
    }
    corpus.push_back(std::move(s));
  }
  std::size_t valid = 0;
  for (const std::string& s : corpus) {
    std::string reference;
    bool refused = false;
    try {
      reference = json(s).dump();
    } catch (const json::exception&) {
      refused = true;
    }
    if (refused) {
      EXPECT_THROW(EventTemplate::Quote(s), json::exception) << s.size();
    } else {
      ++valid;
      ASSERT_EQ(EventTemplate::Quote(s), reference);
    }
  }
  EXPECT_GT(valid, 10000u);  // both answers are tested
  EXPECT_GT(corpus.size() - valid, 10000u);
}

TEST(EventTemplate, ResponsesDeltaWithItsSequenceNumber) {
  EventTemplate t;
  ASSERT_TRUE(t.Make(ResponseTextDeltaTemplate("msg_abc"), 2));
  std::uint64_t sequence = 41;
  for (const std::string text : {"Hi", " \"there\"\n", "ü"}) {
    const std::uint64_t n = sequence;
    EXPECT_EQ(t.Fill({EventTemplate::Quote(text), std::to_string(n)}),
              ResponseTextDelta("msg_abc", text, &sequence));
  }
}

TEST(EventTemplate, RefusesAmbiguousOrMissingPlaceholders) {
  EventTemplate t;
  const std::string p = '"' + EventTemplate::Placeholder(0) + '"';
  EXPECT_FALSE(t.Make("{\"a\":" + p + ",\"b\":" + p + "}", 1));  // e.g. a model named like it
  EXPECT_TRUE(t.empty());
  EXPECT_FALSE(t.Make("{\"a\":1}", 1));
  EXPECT_TRUE(t.Make("{\"a\":" + p + "}", 1));
  EXPECT_EQ(t.Fill({"2"}), "{\"a\":2}");
}

// Filled into a buffer: the same bytes as Fill's, what the buffer held
// replaced, and a buffer that already has the room keeps its storage (a
// recycled chunk buffer: no allocation per token). One that has to grow
// gets spare room, so that a slightly longer text fits next time.
TEST(EventTemplate, FillsABufferInPlace) {
  EventTemplate t;
  ASSERT_TRUE(t.Make("data: {\"a\":\"" + EventTemplate::Placeholder(0) + "\"}\n\n", 1));
  std::string buffer;  // no room: it grows, with the framing's room and slack
  t.Fill({"\"x\""}, &buffer);
  EXPECT_EQ(buffer, t.Fill({"\"x\""}));
  EXPECT_GE(buffer.capacity(), buffer.size() + http_internal::kChunkFraming + 32);
  buffer.assign("stale bytes");  // what the buffer held goes
  const char* storage = buffer.data();
  for (const std::string_view text : {"\"\"", "\"a longer token's text\"", "\"y\""}) {
    t.Fill({text}, &buffer);
    EXPECT_EQ(buffer, t.Fill({text}));
    EXPECT_EQ(buffer.data(), storage) << text;
  }
  buffer.clear();
  buffer.shrink_to_fit();
  t.Fill({std::string(500, 'z')}, &buffer);  // grows, with its framing's room
  EXPECT_EQ(buffer, t.Fill({std::string(500, 'z')}));
  EXPECT_GE(buffer.capacity(), buffer.size() + http_internal::kChunkFraming);
}

// The streamed chunk written by hand (ChunkEvent) against the object it
// replaced, built as nlohmann values and dumped: generated ids, models
// (escapes, control characters, UTF-8, DEL), times, indices, texts, finish
// reasons, role and content flags, logprobs values, chat and completions.
TEST(ChunkEvent, EqualsDumpingTheObject) {
  const auto reference = [](const RenderOptions& o, std::uint32_t index, const std::string& delta,
                            const char* finish, bool role, bool content, json logprobs) {
    json choice = {{"index", index},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", finish[0] ? json(finish) : json(nullptr)}};
    if (o.chat) {
      choice["delta"] = json::object();
      if (role) choice["delta"]["role"] = "assistant";
      if (role || content || !delta.empty()) choice["delta"]["content"] = delta;
    } else {
      choice["text"] = delta;
    }
    const json chunk = {{"id", o.id},
                        {"object", o.chat ? "chat.completion.chunk" : "text_completion"},
                        {"created", o.created},
                        {"model", o.model},
                        {"choices", {choice}}};
    return "data: " + chunk.dump() + "\n\n";
  };
  std::mt19937 rng(46);
  const std::vector<std::string> pieces = {"a",
                                           "Z",
                                           " ",
                                           "\"",
                                           "\\",
                                           "/",
                                           "\n",
                                           "\t",
                                           "\b",
                                           "\f",
                                           "\r",
                                           "\x01",
                                           "\x1f",
                                           "\x7f",
                                           "\xc3\xa9",
                                           "\xe2\x82\xac",
                                           "\xf0\x9f\x98\x80",
                                           EventTemplate::Placeholder(0)};
  const auto text = [&](std::size_t most) {
    std::string t;
    for (std::size_t n = rng() % (most + 1); n > 0; --n) t += pieces[rng() % pieces.size()];
    return t;
  };
  const char* finishes[] = {"", "stop", "length", "abort", "a \"quoted\"\\reason\n"};
  const std::int64_t times[] = {0, 1733500000, -1, INT64_MAX, INT64_MIN};
  for (int i = 0; i < 20000; ++i) {
    RenderOptions o;
    o.chat = rng() % 2;
    o.id = "cmpl-" + text(6);
    o.model = text(8);
    o.created = times[rng() % 5];
    const std::uint32_t index = rng() % 3 == 0 ? rng() : rng() % 8;
    const std::string delta = text(5);
    const char* finish = finishes[rng() % 5];
    const bool role = rng() % 4 == 0, content = rng() % 2;
    json logprobs = nullptr;
    if (rng() % 3 == 0) logprobs = EventTemplate::Placeholder(1);
    if (rng() % 5 == 0) logprobs = json{{"content", json::array({{{"token", text(3)}}})}};
    if (rng() % 7 == 0) logprobs = json{{"token_logprobs", {-0.5, -1e-300, 0.0, 12.25}}};
    ASSERT_EQ(ChunkEvent(o, index, delta, finish, role, content, logprobs),
              reference(o, index, delta, finish, role, content, logprobs))
        << "case " << i;
  }
  // Text that is not UTF-8 is refused as dump() refuses it.
  RenderOptions o;
  for (const std::string bad : {"\xff", "a\xc3", "\xed\xa0\x80"}) {
    EXPECT_THROW(ChunkEvent(o, 0, bad, ""), json::type_error) << bad;
    EXPECT_THROW(reference(o, 0, bad, "", false, false, nullptr), json::type_error) << bad;
  }
}

}  // namespace
}  // namespace sightline::api
