// Logprobs over HTTP against a real engine: completions' lists and chat's
// entries, streamed equal to non-streamed, n > 1, echo with max_tokens 0
// scoring the prompt, vLLM's prompt_logprobs, and the 400s. (That the values
// are the model's log-softmax is engine_core/logprobs_test.cc's part.)
#include <gtest/gtest.h>

#include <algorithm>

#include "api_server/live_api_server.h"

namespace sightline::api {
namespace {

// The streamed chunks' logprobs for choice `index`, concatenated as a body has them.
json StreamedCompletionLogprobs(const std::string& body, int index, std::string* text) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const std::string& e : SseEvents(body)) {
    if (e == "[DONE]") break;
    const json chunk = json::parse(e);
    for (const json& c : chunk["choices"]) {
      if (c["index"] != index) continue;
      *text += c["text"].get<std::string>();
      if (c["logprobs"].is_null()) continue;
      for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (const json& v : c["logprobs"][key]) out[key].push_back(v);
    }
  }
  return out;
}

void ExpectNear(const json& a, const json& b) {
  ASSERT_EQ(a.type(), b.type()) << a << " vs " << b;
  if (a.is_number_float()) {
    EXPECT_NEAR(a.get<double>(), b.get<double>(), 1e-5);
  } else if (a.is_array() || a.is_object()) {
    ASSERT_EQ(a.size(), b.size()) << a << " vs " << b;
    for (auto i = a.begin(), j = b.begin(); i != a.end(); ++i, ++j) {
      if (a.is_object()) {
        EXPECT_EQ(i.key(), j.key());
      }
      ExpectNear(*i, *j);
    }
  } else {
    EXPECT_EQ(a, b);
  }
}

TEST_F(CompletionsTest, CompletionLogprobsStreamedEqualNonStreamedForEachChoice) {
  json body = {{"prompt", "Hello, Sightline"},
               {"max_tokens", 6},
               {"temperature", 0.8},
               {"seed", 3},
               {"n", 2},
               {"logprobs", 3},
               {"ignore_eos", true}};
  const json plain = Complete(body);
  body["stream"] = true;
  body["model"] = "tiny";
  const auto r = HttpClient(port_).Post("/v1/completions", body.dump());
  ASSERT_EQ(r.result_int(), 200);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const json& choice = plain["choices"][i];
    const json& lp = choice["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 6u);  // one per generated token
    std::uint64_t offset = 0;
    for (std::size_t t = 0; t < 6; ++t) {
      const double logprob = lp["token_logprobs"][t];
      EXPECT_LE(logprob, 0.0);
      const json& top = lp["top_logprobs"][t];
      // The top 3, and the sampled token when not among them (texts may merge).
      EXPECT_GE(top.size(), 1u);
      EXPECT_LE(top.size(), 4u);
      ASSERT_TRUE(top.contains(lp["tokens"][t].get<std::string>()));
      EXPECT_EQ(lp["text_offset"][t], offset);
      const std::string token = lp["tokens"][t];  // offsets count code points
      offset += static_cast<std::uint64_t>(
          std::count_if(token.begin(), token.end(), [](char ch) { return (ch & 0xC0) != 0x80; }));
    }
    std::string text;
    ExpectNear(StreamedCompletionLogprobs(r.body(), i, &text), lp);
    EXPECT_EQ(text, choice["text"]);
  }
  EXPECT_NE(plain["choices"][0]["logprobs"], plain["choices"][1]["logprobs"]);  // two samples
}

TEST_F(CompletionsTest, ChatLogprobsHaveTopEntriesAndBytesStreamedOrNot) {
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  json body = {{"model", "tiny"},  {"messages", messages}, {"max_tokens", 5},   {"temperature", 0},
               {"logprobs", true}, {"top_logprobs", 2},    {"ignore_eos", true}};
  auto r = HttpClient(port_).Post("/v1/chat/completions", body.dump());
  ASSERT_EQ(r.result_int(), 200) << r.body();
  const json plain = json::parse(r.body());
  const json& content = plain["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u);
  for (const json& e : content) {
    const std::string token = e["token"];
    std::vector<int> bytes;
    for (unsigned char ch : token) bytes.push_back(ch);
    EXPECT_EQ(e["bytes"], json(bytes));
    ASSERT_EQ(e["top_logprobs"].size(), 2u);
    // Greedy: the token is the most likely, and the top is in order.
    EXPECT_EQ(e["top_logprobs"][0]["token"], e["token"]);
    EXPECT_DOUBLE_EQ(e["top_logprobs"][0]["logprob"].get<double>(), e["logprob"].get<double>());
    EXPECT_GE(e["top_logprobs"][0]["logprob"].get<double>(),
              e["top_logprobs"][1]["logprob"].get<double>());
  }
  body["stream"] = true;
  r = HttpClient(port_).Post("/v1/chat/completions", body.dump());
  json streamed = json::array();
  for (const std::string& e : SseEvents(r.body())) {
    if (e == "[DONE]") break;
    const json chunk = json::parse(e);
    const json& lp = chunk["choices"][0]["logprobs"];
    if (!lp.is_null())
      for (const json& entry : lp["content"]) streamed.push_back(entry);
  }
  ExpectNear(streamed, content);
}

TEST_F(CompletionsTest, EchoWithMaxTokensZeroScoresThePromptAsPromptLogprobsDo) {
  const json scored =
      Complete({{"prompt", "Hello"}, {"echo", true}, {"max_tokens", 0}, {"logprobs", 2}});
  const json& choice = scored["choices"][0];
  EXPECT_EQ(choice["text"], "Hello");  // the prompt alone
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_EQ(scored["usage"]["completion_tokens"], 0);  // nothing generated is returned
  const json& lp = choice["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u);  // BOS and five bytes
  EXPECT_EQ(lp["tokens"][1], "H");
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());  // nothing scores the first token
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  // The same scores as vLLM's prompt_logprobs field, which names token ids.
  const json& prompt_logprobs = choice["prompt_logprobs"];
  ASSERT_EQ(prompt_logprobs.size(), 6u);
  EXPECT_TRUE(prompt_logprobs[0].is_null());
  const std::string hello = "Hello";
  for (std::size_t i = 1; i < 6; ++i) {
    const std::string id = std::to_string(static_cast<unsigned char>(hello[i - 1]));  // byte ids
    ASSERT_TRUE(prompt_logprobs[i].contains(id)) << prompt_logprobs[i];
    EXPECT_DOUBLE_EQ(prompt_logprobs[i][id]["logprob"].get<double>(),
                     lp["token_logprobs"][i].get<double>());
    EXPECT_GE(prompt_logprobs[i][id]["rank"].get<int>(), 1);
    EXPECT_LE(lp["top_logprobs"][i].size(), 3u);
  }
  // With generation, the prompt's scores come first and the text follows the prompt.
  json more_body = {{"prompt", "Hello"}, {"echo", true},     {"max_tokens", 3},
                    {"logprobs", 2},     {"temperature", 0}, {"ignore_eos", true}};
  const json more = Complete(more_body);
  const json& lp2 = more["choices"][0]["logprobs"];
  ASSERT_EQ(lp2["tokens"].size(), 9u);
  for (std::size_t i = 1; i < 6; ++i)
    EXPECT_DOUBLE_EQ(lp2["token_logprobs"][i].get<double>(), lp["token_logprobs"][i].get<double>());
  EXPECT_EQ(more["choices"][0]["text"].get<std::string>().rfind("Hello", 0), 0u);
  EXPECT_EQ(more["usage"]["completion_tokens"], 3);
  // Streamed: the echo's chunk, then the tokens', add up to the body.
  more_body["stream"] = true;
  more_body["model"] = "tiny";
  const auto r = HttpClient(port_).Post("/v1/completions", more_body.dump());
  ASSERT_EQ(r.result_int(), 200);
  std::string text;
  ExpectNear(StreamedCompletionLogprobs(r.body(), 0, &text), lp2);
  EXPECT_EQ(text, more["choices"][0]["text"]);
}

TEST_F(CompletionsTest, LogprobsBeyondTheLimitGetOpenAiErrors) {
  for (const json& body :
       {json{{"model", "tiny"}, {"prompt", "a"}, {"logprobs", 21}},
        json{{"model", "tiny"}, {"prompt", "a"}, {"prompt_logprobs", 1}, {"stream", true}}}) {
    const auto r = HttpClient(port_).Post("/v1/completions", body.dump());
    EXPECT_EQ(r.result_int(), 400) << body;
    const json error = json::parse(r.body())["error"];
    EXPECT_EQ(error["type"], "BadRequestError");
    EXPECT_FALSE(error["param"].get<std::string>().empty());
  }
}

}  // namespace
}  // namespace sightline::api
