// What a streaming client sees, chunk by chunk, as vLLM sends it: a chat
// stream's role chunk comes with the first engine output (not before the
// model ran), and every generated token is a chunk even when its text is
// held back (an incomplete UTF-8 sequence, a possible stop string). Both
// decide the time to first token and the gaps a client measures.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include "api_server/live_api_server.h"
#include "support/raw_http.h"

namespace sightline::api {
namespace {

// The content chunks of a stream (choice chunks that are neither the role
// chunk nor a closing chunk) and its usage.
struct StreamShape {
  int role_chunks = 0, token_chunks = 0, empty_token_chunks = 0;
  std::string text;
  std::uint64_t completion_tokens = 0;
};

StreamShape Shape(const std::string& body, bool chat) {
  StreamShape s;
  for (const std::string& e : SseEvents(body)) {
    if (e == "[DONE]") break;
    const json j = json::parse(e);
    if (j.contains("usage")) s.completion_tokens = j["usage"]["completion_tokens"];
    if (j["choices"].empty()) continue;
    const json& c = j["choices"][0];
    if (!c["finish_reason"].is_null()) continue;  // a closing chunk
    if (chat && c["delta"].contains("role")) {
      ++s.role_chunks;
      continue;
    }
    const std::string piece = chat ? c["delta"]["content"] : c["text"];
    ++s.token_chunks;
    s.empty_token_chunks += piece.empty();
    s.text += piece;
  }
  return s;
}

TEST_F(CompletionsTest, EveryStreamedTokenIsAChunkEvenWhenItsTextIsHeldBack) {
  // The tiny model's greedy bytes include incomplete UTF-8 sequences, whose
  // text waits for the bytes that complete (or replace) them.
  for (const bool chat : {false, true}) {
    json body = {{"model", "tiny"},  {"max_tokens", 64},
                 {"temperature", 0}, {"ignore_eos", true},
                 {"stream", true},   {"stream_options", {{"include_usage", true}}}};
    if (chat)
      body["messages"] = {{{"role", "user"}, {"content", "Tell me about \xc3\xa9t\xc3\xa9"}}};
    else
      body["prompt"] = "Tell me about \xc3\xa9t\xc3\xa9";
    const auto r =
        HttpClient(port_).Post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const StreamShape s = Shape(r.body(), chat);
    EXPECT_EQ(s.completion_tokens, 64u) << chat;
    // One chunk per generated token, and at the end at most one more: the
    // text still held back when the request finished, flushed.
    EXPECT_GE(s.token_chunks, 64) << "a token without its chunk (chat=" << chat << ")";
    EXPECT_LE(s.token_chunks, 65) << chat;
    EXPECT_GT(s.empty_token_chunks, 0) << "the prompt must exercise held-back text";
    if (chat) {
      EXPECT_EQ(s.role_chunks, 1);
    }
    // The text is the same as without streaming.
    body.erase("stream");
    body.erase("stream_options");
    const auto plain =
        HttpClient(port_).Post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
    const json p = json::parse(plain.body());
    EXPECT_EQ(s.text, chat ? p["choices"][0]["message"]["content"] : p["choices"][0]["text"]);
  }
}

// HTTP/1.1 keeps the connection after a stream, as vLLM's server does: a
// client that reuses connections (vLLM's benchmark, the OpenAI SDKs) sends
// its next request on it, streamed or not, and one sent before the stream
// ended (pipelined) is answered after it, in order.
TEST_F(CompletionsTest, AConnectionServesRequestsAfterAStream) {
  auto body = [](bool stream, int max_tokens) {
    json b = {{"model", "tiny"},
              {"prompt", "Hello"},
              {"max_tokens", max_tokens},
              {"ignore_eos", true},
              {"stream", stream}};
    if (stream) b["stream_options"] = {{"include_usage", true}};
    return b.dump();
  };
  HttpClient c(port_);
  for (const bool stream : {true, true, false, true}) {
    const auto r = c.Post("/v1/completions", body(stream, 8));
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(r["Connection"], "") << "HTTP/1.1 keeps the connection without saying so";
    if (stream) {
      const std::vector<std::string> events = SseEvents(r.body());
      ASSERT_FALSE(events.empty());
      EXPECT_EQ(events.back(), "[DONE]");
    } else {
      EXPECT_EQ(json::parse(r.body())["usage"]["completion_tokens"], 8);
    }
  }
  // Pipelined: both requests in one write, before the first stream began.
  sightline::testing::RawSocket raw(port_);
  std::string two;
  for (const int n : {5, 7}) {
    const std::string b = body(true, n);
    two +=
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(b.size()) + "\r\n\r\n" + b;
  }
  ASSERT_TRUE(raw.Send(two));
  // Read until both streams' last chunks arrived (each is an event apart).
  std::string wire;
  auto ends = [&wire] {
    int n = 0;
    for (std::size_t at = 0; (at = wire.find("\r\n0\r\n\r\n", at)) != std::string::npos; at += 7)
      ++n;
    return n;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ends() < 2 && !raw.eof() && std::chrono::steady_clock::now() < deadline)
    wire += raw.ReadSome(1);
  ASSERT_EQ(ends(), 2) << wire;
  EXPECT_FALSE(raw.ClosedWithin(0.2)) << "the connection is still kept";
  const std::size_t second = wire.find("HTTP/1.1 200", 1);
  ASSERT_NE(second, std::string::npos) << wire;
  for (const auto& [part, tokens] :
       {std::pair{wire.substr(0, second), 5}, std::pair{wire.substr(second), 7}}) {
    const std::vector<std::string> events = SseEvents(part);
    ASSERT_GE(events.size(), 2u) << part;
    EXPECT_EQ(events.back(), "[DONE]");
    EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["completion_tokens"], tokens) << part;
  }
}

// With the engine stopped (SIGSTOP) no output can exist, so whatever the
// client receives besides the headers comes from the API server alone.
TEST_F(CompletionsTest, AChatStreamSendsItsRoleWithTheFirstOutputNotBefore) {
  ASSERT_EQ(kill(engine_.pid(), SIGSTOP), 0);
  sightline::testing::RawSocket c(port_);
  ASSERT_TRUE(c.ok());
  const std::string body = json{
      {"model", "tiny"},
      {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
      {"max_tokens", 4},
      {"ignore_eos", true},
      {"stream", true}}.dump();
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_TRUE(c.Send(req));
  const std::string early = c.ReadUntil(60, "\r\n\r\n");  // the stream's headers
  ASSERT_NE(early.find("\r\n\r\n"), std::string::npos) << early;
  // 300 ms of silence: nothing but the headers while the model cannot run.
  pollfd p{c.fd(), POLLIN, 0};
  const int ready = poll(&p, 1, 300);
  EXPECT_EQ(early.find("data:"), std::string::npos) << early;
  EXPECT_EQ(ready, 0) << "the API server sent a chunk before the engine's first output";
  ASSERT_EQ(kill(engine_.pid(), SIGCONT), 0);
  const std::string all = early + c.ReadUntil(60, "data: [DONE]");
  EXPECT_NE(all.find("data: [DONE]"), std::string::npos) << all;
  // Each event is one HTTP chunk, so the events read whole between the sizes.
  const std::vector<std::string> events = SseEvents(all);
  ASSERT_GE(events.size(), 3u) << all;
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"]["role"], "assistant")
      << "the role chunk is the stream's first";
}

}  // namespace
}  // namespace sightline::api
