// The OpenAI endpoints end to end against a real engine: tokens, usage,
// streaming, chat, Responses, several prompts and n samples, stop strings,
// penalties, tokenize/detokenize and OpenAI error bodies.
#include <gtest/gtest.h>

#include "api_server/live_api_server.h"

namespace sightline::api {
namespace {

TEST_F(CompletionsTest, NonStreamingAndStreamingAgreeAndUsageIsExact) {
  const json plain = Complete(kGreedy);
  EXPECT_EQ(plain["object"], "text_completion");
  EXPECT_EQ(plain["usage"]["prompt_tokens"], 17);  // byte tokenizer: BOS, one token per byte
  EXPECT_EQ(plain["usage"]["completion_tokens"], 8);
  EXPECT_EQ(plain["choices"][0]["finish_reason"], "length");
  json stream_body = kGreedy;
  stream_body["stream"] = true;
  stream_body["stream_options"] = {{"include_usage", true}};
  stream_body["model"] = "tiny";
  const auto r = HttpClient(port_).Post("/v1/completions", stream_body.dump());
  EXPECT_EQ(r["Content-Type"], "text/event-stream");
  std::string text, finish;
  json usage;
  std::vector<std::string> events;
  for (std::size_t at = 0; (at = r.body().find("data: ", at)) != std::string::npos;) {
    const std::size_t end = r.body().find("\n\n", at);
    events.push_back(r.body().substr(at + 6, end - at - 6));
    at = end;
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    if (e.contains("usage")) {
      usage = e["usage"];
      EXPECT_TRUE(e["choices"].empty());
      EXPECT_EQ(i + 2, events.size());  // the usage chunk comes last, before [DONE]
      continue;
    }
    text += e["choices"][0]["text"].get<std::string>();
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, plain["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 8);
}

TEST_F(CompletionsTest, ChatCompletionsStreamingAndNot) {
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  HttpClient c(port_);
  auto r = c.Post("/v1/chat/completions", json{{"model", "tiny"},
                                               {"messages", messages},
                                               {"max_completion_tokens", 6},
                                               {"temperature", 0},
                                               {"ignore_eos", true}}
                                              .dump());
  ASSERT_EQ(r.result_int(), 200) << r.body();
  const json plain = json::parse(r.body());
  EXPECT_EQ(plain["object"], "chat.completion");
  EXPECT_EQ(plain["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(plain["usage"]["prompt_tokens"],
            std::string("user: Hi\nassistant: ").size());  // plain template
  EXPECT_EQ(plain["usage"]["completion_tokens"], 6);
  r = c.Post("/v1/chat/completions", json{{"model", "tiny"},
                                          {"messages", messages},
                                          {"max_tokens", 6},
                                          {"temperature", 0},
                                          {"ignore_eos", true},
                                          {"stream", true}}
                                         .dump());
  std::string text;
  bool saw_role = false;
  for (std::size_t at = 0; (at = r.body().find("data: ", at)) != std::string::npos;) {
    const std::size_t end = r.body().find("\n\n", at);
    const std::string data = r.body().substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const json e = json::parse(data);
    EXPECT_EQ(e["object"], "chat.completion.chunk");
    const json& delta = e["choices"][0]["delta"];
    if (delta.contains("role")) saw_role = true;
    if (delta.contains("content")) text += delta["content"].get<std::string>();
  }
  EXPECT_TRUE(saw_role);
  EXPECT_EQ(text, plain["choices"][0]["message"]["content"]);
  // The next request on a new connection.
  r = HttpClient(port_).Post("/v1/chat/completions",
                             json{{"model", "tiny"}, {"messages", json::array()}}.dump());
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(
      Page()
          ["http_requests_total{handler=\"/v1/chat/completions\",method=\"POST\",status=\"4xx\"}"],
      1);
}

TEST_F(CompletionsTest, TokenizeAndDetokenize) {
  HttpClient c(port_);
  auto r = c.Post("/tokenize", json{{"prompt", "héllo"}}.dump());
  ASSERT_EQ(r.result_int(), 200);
  const json t = json::parse(r.body());
  EXPECT_EQ(t["count"], 7);  // BOS (add_special_tokens defaults to true), é is two bytes
  EXPECT_EQ(t["tokens"][0], 256);
  EXPECT_EQ(t["max_model_len"], 2048);
  // As vLLM's /detokenize: special tokens are kept.
  r = c.Post("/detokenize", json{{"tokens", t["tokens"]}}.dump());
  EXPECT_EQ(json::parse(r.body())["prompt"], "<s>héllo");
  r = c.Post("/tokenize", json{{"prompt", "héllo"}, {"add_special_tokens", false}}.dump());
  EXPECT_EQ(json::parse(r.body())["count"], 6);
  // Messages: the template's text only (add_special_tokens defaults to false).
  r = c.Post("/tokenize", json{{"messages", {{{"role", "user"}, {"content", "Hi"}}}}}.dump());
  EXPECT_EQ(json::parse(r.body())["count"], std::string("user: Hi\nassistant: ").size());
  // Invalid UTF-8: one U+FFFD per maximal subpart (F0 9F 98 is one), as vLLM.
  r = c.Post("/detokenize", json{{"tokens", {0xF0, 0x9F, 0x98, 'A'}}}.dump());
  EXPECT_EQ(json::parse(r.body())["prompt"],
            "\xEF\xBF\xBD"
            "A");
  r = c.Post("/tokenize", json{{"prompt", "x"}, {"add_special_tokens", "yes"}}.dump());
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(json::parse(r.body())["error"]["param"], "add_special_tokens");
  EXPECT_EQ(c.Post("/detokenize", json{{"tokens", {1, 99999}}}.dump()).result_int(), 400);
  EXPECT_EQ(c.Post("/tokenize", "[]").result_int(), 400);
}

// vLLM's add_special_tokens: a completion's text prompt gets the
// tokenizer's BOS (the byte tokenizer's is 256) unless told not to; token-id
// prompts and chat prompts (whose template writes BOS itself) do not.
TEST_F(CompletionsTest, CompletionsGetBosChatDoesNot) {
  const std::string prompt = "Hello";
  auto usage = [&](json body) { return Complete(body)["usage"]["prompt_tokens"].get<int>(); };
  EXPECT_EQ(usage({{"prompt", prompt}, {"max_tokens", 1}}), 6);
  EXPECT_EQ(usage({{"prompt", prompt}, {"max_tokens", 1}, {"add_special_tokens", false}}), 5);
  EXPECT_EQ(usage({{"prompt", {72, 101}}, {"max_tokens", 1}}), 2);
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  const std::size_t templated = std::string("user: Hi\nassistant: ").size();
  HttpClient c(port_);
  for (const bool add : {false, true}) {
    json body = {{"model", "tiny"}, {"messages", messages}, {"max_tokens", 1}};
    if (add) body["add_special_tokens"] = true;
    const auto r = c.Post("/v1/chat/completions", body.dump());
    ASSERT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(json::parse(r.body())["usage"]["prompt_tokens"], templated + (add ? 1 : 0));
  }
  const auto r =
      c.Post("/v1/completions", json{{"prompt", "x"}, {"skip_special_tokens", "no"}}.dump());
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(json::parse(r.body())["error"]["param"], "skip_special_tokens");
}

// skip_special_tokens=false (per request) shows special tokens' text; the
// same greedy tokens without it lose exactly those texts; streamed and not
// streamed agree either way.
TEST_F(CompletionsTest, SkipSpecialTokensPerRequest) {
  auto text = [&](bool skip, bool stream) {
    json body = kGreedy;
    body["max_tokens"] = 48;
    body["skip_special_tokens"] = skip;
    body["model"] = "tiny";
    if (!stream) return Complete(body)["choices"][0]["text"].get<std::string>();
    body["stream"] = true;
    const auto r = HttpClient(port_).Post("/v1/completions", body.dump());
    std::string out;
    for (const std::string& e : SseEvents(r.body()))
      if (e != "[DONE]") out += json::parse(e)["choices"][0]["text"].get<std::string>();
    return out;
  };
  const std::string shown = text(false, false), skipped = text(true, false);
  EXPECT_EQ(text(false, true), shown);
  EXPECT_EQ(text(true, true), skipped);
  std::string stripped = shown;
  for (const std::string name : {"<s>", "</s>", "<pad>", "<unk>"})
    for (std::size_t at; (at = stripped.find(name)) != std::string::npos;)
      stripped.erase(at, name.size());
  EXPECT_EQ(stripped, skipped);
}

TEST_F(CompletionsTest, StopStringsEndTheRequestAndAreNotEmitted) {
  const std::string full = Complete(kGreedy)["choices"][0]["text"];
  // The second character of the answer (whole, however many bytes) as the stop string.
  std::size_t second = 1;
  while (second < full.size() && (static_cast<unsigned char>(full[second]) & 0xC0) == 0x80)
    ++second;
  std::size_t third = second + 1;
  while (third < full.size() && (static_cast<unsigned char>(full[third]) & 0xC0) == 0x80) ++third;
  ASSERT_LT(second, full.size());
  const std::string stop = full.substr(second, third - second);
  json body = kGreedy;
  body["stop"] = stop;
  const json stopped = Complete(body);
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(stopped["choices"][0]["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(Page()[Key("vllm:request_success_total", "finished_reason=\"stop\",")], 1);
}
TEST_F(CompletionsTest, SeveralPromptsAndNSamplesFanOut) {
  // Two prompts (BOS and 5, BOS and 10 byte tokens), two seeded samples each: four choices.
  const json body = {{"prompt", {"Hello", "Sightline!"}},
                     {"n", 2},
                     {"max_tokens", 8},
                     {"temperature", 1},
                     {"seed", 11},
                     {"ignore_eos", true}};
  const json r = Complete(body);
  ASSERT_EQ(r["choices"].size(), 4u) << r.dump();
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r["choices"][i]["index"], i);
    EXPECT_EQ(r["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(r["usage"]["prompt_tokens"], 17);  // each prompt once, whatever n is
  EXPECT_EQ(r["usage"]["completion_tokens"], 32);
  // Choice 3 is prompt 1's sample 1: seed + 1, reproducible on its own.
  json alone = body;
  alone["prompt"] = "Sightline!";
  alone["n"] = 1;
  alone["seed"] = 12;
  EXPECT_EQ(Complete(alone)["choices"][0]["text"], r["choices"][3]["text"]);

  // Streamed, the same choices arrive interleaved, each with its index.
  json streamed = body;
  streamed["model"] = "tiny";
  streamed["stream"] = true;
  const auto s = HttpClient(port_).Post("/v1/completions", streamed.dump());
  const std::vector<std::string> events = SseEvents(s.body());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<std::string> text(4);
  std::vector<int> finishes(4);
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const json e = json::parse(events[i]);
    ASSERT_EQ(e["choices"].size(), 1u) << events[i];
    const std::size_t index = e["choices"][0]["index"];
    ASSERT_LT(index, 4u);
    text[index] += e["choices"][0]["text"].get<std::string>();
    finishes[index] += !e["choices"][0]["finish_reason"].is_null();
  }
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(text[i], r["choices"][i]["text"]) << i;
    EXPECT_EQ(finishes[i], 1) << i;
  }

  // Metrics: each child is a finished request; each prompt is a parent of n.
  auto p = Page();
  EXPECT_EQ(p[Key("vllm:request_success_total", "finished_reason=\"length\",")], 4 + 1 + 4);
  EXPECT_EQ(p[Key("vllm:request_params_n_count")], 2 + 1 + 2);
  EXPECT_EQ(p[Key("vllm:request_params_n_sum")], 2 * 2 + 1 + 2 * 2);
  EXPECT_EQ(p[Key("vllm:request_max_num_generation_tokens_sum")], 8 * (2 + 1 + 2));
  EXPECT_EQ(p[Key("vllm:request_generation_tokens_count")], 4 + 1 + 4);
  EXPECT_EQ(p[Key("vllm:generation_tokens_total")], 8 * (4 + 1 + 4));
  EXPECT_EQ(p["http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"}"],
            3);
  EXPECT_EQ(p[Key("vllm:num_requests_running")], 0);

  // Chat takes n too; a stream opens each choice with the assistant's role.
  const json chat = {{"model", "tiny"},
                     {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                     {"n", 2},
                     {"max_tokens", 3},
                     {"stream", true}};
  const auto c = HttpClient(port_).Post("/v1/chat/completions", chat.dump());
  std::vector<int> roles(2);
  for (const std::string& e : SseEvents(c.body()))
    if (e != "[DONE]") {
      const json chunk = json::parse(e);
      const json& choice = chunk["choices"][0];
      if (choice["delta"].contains("role")) ++roles.at(choice["index"].get<std::size_t>());
    }
  EXPECT_EQ(roles, (std::vector<int>{1, 1}));
}

TEST_F(CompletionsTest, ResponsesStreamingAndNotAgree) {
  const json body = {{"model", "tiny"},
                     {"input", "Hello"},
                     {"max_output_tokens", 6},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const auto r = HttpClient(port_).Post("/v1/responses", body.dump());
  ASSERT_EQ(r.result_int(), 200) << r.body();
  const json plain = json::parse(r.body());
  EXPECT_EQ(plain["object"], "response");
  EXPECT_EQ(plain["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(plain["status"], "incomplete");  // max_output_tokens reached
  EXPECT_EQ(plain["incomplete_details"]["reason"], "max_output_tokens");
  const std::string prompt = "user: Hello\nassistant: ";  // plain template, byte tokens
  EXPECT_EQ(plain["usage"]["input_tokens"], prompt.size());
  EXPECT_EQ(plain["usage"]["output_tokens"], 6);
  EXPECT_EQ(plain["usage"]["total_tokens"], prompt.size() + 6);
  ASSERT_EQ(plain["output"].size(), 1u);
  EXPECT_EQ(plain["output"][0]["role"], "assistant");
  const std::string answer = plain["output"][0]["content"][0]["text"];

  json streamed = body;
  streamed["stream"] = true;
  const auto s = HttpClient(port_).Post("/v1/responses", streamed.dump());
  ASSERT_EQ(s.result_int(), 200);
  std::vector<std::string> types;
  std::string deltas;
  json completed;
  const std::vector<std::string> events = SseEvents(s.body());
  for (std::size_t i = 0; i < events.size(); ++i) {
    ASSERT_NE(events[i], "[DONE]");  // Responses streams end with response.completed
    const json e = json::parse(events[i]);
    EXPECT_EQ(e["sequence_number"], i);
    types.push_back(e["type"]);
    if (e["type"] == "response.output_text.delta") deltas += e["delta"].get<std::string>();
    if (e["type"] == "response.output_text.done") {
      EXPECT_EQ(e["text"], answer);
    }
    if (e["type"] == "response.completed") completed = e["response"];
  }
  ASSERT_GE(types.size(), 9u);
  const std::vector<std::string> opening = {"response.created", "response.in_progress",
                                            "response.output_item.added",
                                            "response.content_part.added"};
  const std::vector<std::string> closing = {"response.output_text.done",
                                            "response.content_part.done",
                                            "response.output_item.done", "response.completed"};
  EXPECT_EQ(std::vector<std::string>(types.begin(), types.begin() + 4), opening);
  EXPECT_EQ(std::vector<std::string>(types.end() - 4, types.end()), closing);
  EXPECT_EQ(deltas, answer);
  for (const char* field : {"input_tokens", "output_tokens", "total_tokens"})
    EXPECT_EQ(completed["usage"][field], plain["usage"][field]) << field;
  // The same prompt again: its full KV blocks come from the prefix cache.
  EXPECT_EQ(plain["usage"]["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_GT(completed["usage"]["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(completed["status"], "incomplete");
  EXPECT_FALSE(completed.contains("metrics"));  // not asked for

  auto p = Page();
  EXPECT_EQ(p[Key("vllm:request_success_total", "finished_reason=\"length\",")], 2);
  EXPECT_EQ(p["http_requests_total{handler=\"/v1/responses\",method=\"POST\",status=\"2xx\"}"], 2);
  const auto bad = HttpClient(port_).Post("/v1/responses", json{{"input", 5}}.dump());
  EXPECT_EQ(bad.result_int(), 400);
  EXPECT_EQ(json::parse(bad.body())["error"]["type"], "BadRequestError");
}

TEST_F(CompletionsTest, PenaltiesReachTheSampler) {
  // Greedy decoding of the seeded dummy model is deterministic; a huge
  // repetition penalty (on every prompt and output byte) changes its picks.
  json body = kGreedy;
  body["max_tokens"] = 16;
  const std::string plain = Complete(body)["choices"][0]["text"];
  body["repetition_penalty"] = 100;
  const std::string penalized = Complete(body)["choices"][0]["text"];
  EXPECT_NE(penalized, plain);
  body["repetition_penalty"] = 1;
  EXPECT_EQ(Complete(body)["choices"][0]["text"], plain);  // 1 is off
}

TEST_F(CompletionsTest, BadRequestsGetOpenAiErrors) {
  HttpClient c(port_);
  auto r = c.Post("/v1/completions", "{not json");
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_NE(r.body().find("\"error\""), std::string::npos);
  r = c.Post("/v1/completions", json{{"model", "gpt-4"}, {"prompt", "x"}}.dump());
  EXPECT_EQ(r.result_int(), 404);
  r = c.Post("/v1/completions", json{{"prompt", std::string(3000, 'x')}}.dump());  // + BOS
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_NE(r.body().find("3001 tokens"), std::string::npos) << r.body();
  EXPECT_NE(r.body().find("2048"), std::string::npos);
  r = c.Post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", -3}}.dump());
  EXPECT_EQ(r.result_int(), 400);
  r = c.Post("/v1/completions", json{{"prompt", "x"}, {"max_tokens", 0}}.dump());  // without echo
  EXPECT_EQ(r.result_int(), 400);
  r = c.Post("/v1/completions", json{{"prompt", {1, 2, 99999}}}.dump());
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(c.Request("GET", "/v1/models").result_int(), 200);
  EXPECT_EQ(Complete(kGreedy)["usage"]["completion_tokens"], 8);  // nothing else harmed
}

}  // namespace
}  // namespace sightline::api
