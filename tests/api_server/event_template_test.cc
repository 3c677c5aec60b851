// EventTemplate: the streamed events it fills are byte for byte what
// rendering the whole object gives, for any text (escapes, UTF-8, quotes).
#include "output/event_template.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sightline::api
