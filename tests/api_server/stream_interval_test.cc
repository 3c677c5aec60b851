// --stream-interval (vLLM's): a stream sends its first token at once, then
// its tokens together every N, and what is held at its end; text, logprobs,
// usage and the finish reason are what interval 1 sends, only in fewer
// chunks, and the metrics still see every engine step (ITL per step). Real
// engine and API-server processes (live_api_server.h), intervals 1, 3 and
// one longer than the output.
#include <gtest/gtest.h>

#include "api_server/live_api_server.h"

namespace sightline::api {
namespace {

// What one streamed completion showed: its text chunks, text, logprob
// tokens, finish reason and usage.
struct Streamed {
  int text_chunks = 0;  // chunks with tokens
  std::string text, finish;
  std::vector<std::string> logprob_tokens;
  json usage;
};

Streamed StreamCompletion(int port, bool chat) {
  json body = kGreedy;
  body["model"] = "tiny";
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  body["logprobs"] = chat ? json(true) : json(1);
  if (chat) {
    body.erase("prompt");
    body["messages"] = json::array({{{"role", "user"}, {"content", "Hello, Sightline"}}});
    body["top_logprobs"] = 1;
  }
  const auto r =
      HttpClient(port).Post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
  EXPECT_EQ(r.result_int(), 200) << r.body();
  Streamed s;
  const std::vector<std::string> events = SseEvents(r.body());
  EXPECT_FALSE(events.empty());
  if (events.empty()) return s;
  EXPECT_EQ(events.back(), "[DONE]");
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    if (e.contains("usage") && !e["usage"].is_null()) s.usage = e["usage"];
    if (e["choices"].empty()) continue;
    const json& c = e["choices"][0];
    if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
    const json& lp = c["logprobs"];
    if (chat) {
      if (c["delta"].contains("content")) s.text += c["delta"]["content"].get<std::string>();
    } else {
      s.text += c["text"].get<std::string>();
    }
    // Every chunk with tokens carries their logprobs; the role chunk, the
    // closing one and the detokenizer's flush at the end (interval 1) none.
    if (lp.is_null()) continue;
    for (const json& t : chat ? lp["content"] : lp["tokens"])
      s.logprob_tokens.push_back(chat ? t["token"].get<std::string>() : t.get<std::string>());
    ++s.text_chunks;
  }
  return s;
}

void ExpectIntervalHolds(int port, int interval, metrics::Registry* reg) {
  // 8 tokens: the first at once, then every `interval`, the rest at the end.
  const int expected_chunks = 1 + (7 + interval - 1) / interval;
  for (const bool chat : {false, true}) {
    SCOPED_TRACE(chat ? "chat" : "completions");
    const Streamed s = StreamCompletion(port, chat);
    EXPECT_EQ(s.text_chunks, expected_chunks);
    EXPECT_EQ(s.logprob_tokens.size(), 8u);
    EXPECT_EQ(s.finish, "length");
    EXPECT_EQ(s.usage["completion_tokens"], 8);
    // The same text as interval 1 and as the whole body.
    json body = kGreedy;
    body["model"] = "tiny";
    if (chat) {
      body.erase("prompt");
      body["messages"] = json::array({{{"role", "user"}, {"content", "Hello, Sightline"}}});
    }
    const auto r =
        HttpClient(port).Post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const json whole = json::parse(r.body());
    EXPECT_EQ(s.text, chat ? whole["choices"][0]["message"]["content"].get<std::string>()
                           : whole["choices"][0]["text"].get<std::string>());
  }
  // Every engine step is an ITL observation whatever the interval: 4
  // requests of 8 tokens, 7 steps after each one's first.
  const auto page = ParseSamples(reg->Render(metrics::ExpositionFormat::kPrometheusText));
  const std::string itl =
      "vllm:inter_token_latency_seconds_count{engine=\"0\",model_name=\"tiny\"}";
  EXPECT_EQ(page.at(itl), 4 * 7);
  // A stop string inside a held group: the text before it, then "stop".
  json plain = kGreedy;
  plain["model"] = "tiny";
  const std::string whole = json::parse(
      HttpClient(port).Post("/v1/completions", plain.dump()).body())["choices"][0]["text"];
  ASSERT_GE(whole.size(), 6u);
  plain["stop"] = whole.substr(4, 1);
  const json cut = json::parse(HttpClient(port).Post("/v1/completions", plain.dump()).body());
  plain["stream"] = true;
  const auto r = HttpClient(port).Post("/v1/completions", plain.dump());
  std::string text, finish;
  const std::vector<std::string> events = SseEvents(r.body());
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json c = json::parse(events[i])["choices"][0];
    text += c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(text, cut["choices"][0]["text"]);
  EXPECT_EQ(finish, "stop");
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "stop");
}

class StreamIntervalOneTest : public CompletionsTest {};
class StreamIntervalThreeTest : public CompletionsTest {
  void SetUp() override {
    extra_api_args_ = {"--stream-interval", "3"};
    CompletionsTest::SetUp();
  }
};
class StreamIntervalLongTest : public CompletionsTest {
  void SetUp() override {
    extra_api_args_ = {"--stream-interval", "100"};
    CompletionsTest::SetUp();
  }
};

TEST_F(StreamIntervalOneTest, EveryTokenIsAChunk) {
  ExpectIntervalHolds(port_, 1, reg_.get());
}
TEST_F(StreamIntervalThreeTest, TokensGoOutInThrees) {
  ExpectIntervalHolds(port_, 3, reg_.get());
}
TEST_F(StreamIntervalLongTest, TheFirstTokenThenTheRestAtTheEnd) {
  ExpectIntervalHolds(port_, 100, reg_.get());
}

}  // namespace
}  // namespace sightline::api
