// Request metrics end to end against a real engine: exact counters and
// histogram counts, the HTTP families on every instrumented route, the
// engine label from the engine that served, a client hanging up counted as
// abort, per-request metrics on bodies and final usage chunks, and /load.
#include <gtest/gtest.h>

#include "api_server/live_api_server.h"
#include "support/raw_http.h"

namespace sightline::api {
namespace {

using sightline::testing::RawSocket;

TEST_F(CompletionsTest, RequestMetricsAreExact) {
  constexpr int kN = 3, kP = 17, kM = 8;  // kGreedy's 16 bytes and BOS
  for (int i = 0; i < kN; ++i) Complete(kGreedy);
  auto p = Page();
  EXPECT_EQ(p[Key("vllm:request_success_total", "finished_reason=\"length\",")], kN);
  EXPECT_EQ(p[Key("vllm:prompt_tokens_total")], kN * kP);
  EXPECT_EQ(p[Key("vllm:generation_tokens_total")], kN * kM);
  EXPECT_EQ(p[Key("vllm:inter_token_latency_seconds_count")], kN * (kM - 1));
  EXPECT_EQ(p[Key("vllm:time_to_first_token_seconds_count")], kN);
  EXPECT_EQ(p[Key("vllm:e2e_request_latency_seconds_count")], kN);
  EXPECT_EQ(p[Key("vllm:request_generation_tokens_sum")], kN * kM);
  EXPECT_EQ(p[Key("vllm:request_params_max_tokens_sum")], kN * kM);
  EXPECT_EQ(p[Key("vllm:request_queue_time_seconds_count")], kN);
  EXPECT_EQ(p[Key("vllm:request_time_per_output_token_seconds_count")], kN);
  EXPECT_EQ(p["http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"}"],
            kN);
  EXPECT_EQ(p["http_request_duration_highr_seconds_count"], kN);
  // The cached part of later prompts (same text) shows up split by source.
  const double cached = p[Key("vllm:prompt_tokens_cached_total")];
  EXPECT_EQ(p["vllm:prompt_tokens_by_source_total{engine=\"0\",model_name=\"tiny\",source=\"local_"
              "compute\"}"] +
                p["vllm:prompt_tokens_by_source_total{engine=\"0\",model_name=\"tiny\",source="
                  "\"local_cache_hit\"}"],
            kN * kP);
  EXPECT_EQ(p["vllm:prompt_tokens_by_source_total{engine=\"0\",model_name=\"tiny\",source=\"local_"
              "cache_hit\"}"],
            cached);
  EXPECT_EQ(p[Key("vllm:num_requests_running")], 0);
}

// The HTTP families move once per request on every route but the excluded
// ones (METRICS.md §6), whoever answers: a handler, an error body, the
// router; sizes are the request's Content-Length and the body sent.
TEST_F(CompletionsTest, EveryInstrumentedRouteCountsOnceAndExcludedOnesNothing) {
  struct Call {
    std::string verb, target, body, handler, method, status;
  };
  json stream = kGreedy;
  stream["model"] = "tiny";
  stream["stream"] = true;
  const std::vector<Call> calls = {
      {"POST", "/tokenize", json{{"prompt", "hi"}}.dump(), "/tokenize", "POST", "2xx"},
      {"POST", "/tokenize", "[]", "/tokenize", "POST", "4xx"},
      {"POST", "/detokenize", json{{"tokens", {104, 105}}}.dump(), "/detokenize", "POST", "2xx"},
      {"GET", "/v1/models", "", "/v1/models", "GET", "2xx"},
      {"GET", "/v1/models?x=1", "", "/v1/models", "GET", "2xx"},
      {"POST", "/v1/completions", "{not json", "/v1/completions", "POST", "4xx"},
      {"GET", "/v1/completions", "", "/v1/completions", "GET", "4xx"},
      {"GET", "/no/such/route", "", "none", "GET", "4xx"},
      {"POST", "/v1/completions", stream.dump(), "/v1/completions", "POST", "2xx"},
  };
  auto sum = [](const std::map<std::string, double>& p, const std::string& prefix) {
    double total = 0;
    for (const auto& [key, value] : p)
      if (key.rfind(prefix, 0) == 0) total += value;
    return total;
  };
  for (const Call& c : calls) {
    SCOPED_TRACE(c.target + " " + c.body);
    auto before = Page();
    const auto r =
        HttpClient(port_).Request(c.verb, c.target, {{"Content-Type", "application/json"}}, c.body);
    auto after = Page();
    auto moved = [&](const std::string& key) { return after[key] - before[key]; };
    const std::string h = "{handler=\"" + c.handler + "\"}";
    const std::string hm = "{handler=\"" + c.handler + "\",method=\"" + c.method + "\"";
    EXPECT_EQ(moved("http_requests_total" + hm + ",status=\"" + c.status + "\"}"), 1);
    EXPECT_EQ(sum(after, "http_requests_total") - sum(before, "http_requests_total"), 1);
    EXPECT_EQ(moved("http_request_size_bytes_sum" + h), c.body.size());
    // De-chunked: a stream's payload.
    EXPECT_EQ(moved("http_response_size_bytes_sum" + h), r.body().size());
    EXPECT_EQ(moved("http_request_duration_highr_seconds_count"), 1);
    EXPECT_EQ(moved("http_request_duration_seconds_count" + hm + "}"), 1);
  }
  const auto before = Page();
  HttpClient c(port_);
  for (const char* path : {"/metrics", "/health", "/ping", "/version"})
    EXPECT_EQ(c.Request("GET", path).result_int(), 200) << path;
  EXPECT_EQ(sum(Page(), "http_requests_total"), sum(before, "http_requests_total"));
}

// A stream that fails after its header (the engine died) is counted once,
// with the status it sent; how it ended is the stream outcome's to say.
TEST_F(CompletionsTest, AStreamFailingAfterItsHeaderCountsOnceWithTheStatusSent) {
  RawSocket c(port_);
  json body = {{"model", "tiny"},
               {"prompt", "long"},
               {"max_tokens", 1500},
               {"ignore_eos", true},
               {"stream", true}};
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(body.dump().size()) + "\r\n\r\n" + body.dump();
  ASSERT_TRUE(c.Send(req));
  std::string received = c.ReadSome(60);  // the stream has started
  ASSERT_FALSE(received.empty());
  engine_.KillAndWait(SIGKILL);
  received += c.ReadUntil(120, "\r\n0\r\n\r\n");  // to the last chunk
  EXPECT_NE(received.find("\"error\""), std::string::npos);
  EXPECT_EQ(received.find("[DONE]"), std::string::npos);
  auto p = Page();
  double all = 0;
  for (const auto& [key, value] : p)
    if (key.rfind("http_requests_total", 0) == 0) all += value;
  EXPECT_EQ(all, 1);
  EXPECT_EQ(p["http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"}"],
            1);
  EXPECT_EQ(p["sightline:stream_outcomes_total{handler=\"/v1/completions\",outcome=\"error_after_"
              "headers\"}"],
            1);
  EXPECT_EQ(p["http_request_size_bytes_sum{handler=\"/v1/completions\"}"], body.dump().size());
  EXPECT_GT(p["http_response_size_bytes_sum{handler=\"/v1/completions\"}"], 0);
}

// The request-scoped families carry the index of the engine that served.
class EngineLabelTest : public CompletionsTest {
 protected:
  void SetUp() override {
    extra_engine_args_ = {"--engine-index", "1"};
    CompletionsTest::SetUp();
  }
};

TEST_F(EngineLabelTest, RequestMetricsCarryTheServingEnginesIndex) {
  Complete(kGreedy);
  auto p = Page();
  auto key = [](const std::string& name, const char* engine, const std::string& extra = "") {
    return name + "{engine=\"" + engine + "\"," + extra + "model_name=\"tiny\"}";
  };
  EXPECT_EQ(p[key("vllm:request_success_total", "1", "finished_reason=\"length\",")], 1);
  for (const char* name :
       {"vllm:e2e_request_latency_seconds_count", "vllm:time_to_first_token_seconds_count",
        "vllm:request_prefill_time_seconds_count", "vllm:request_params_n_count"}) {
    EXPECT_EQ(p[key(name, "1")], 1) << name;
    EXPECT_EQ(p[key(name, "0")], 0) << name;  // engine 0's series, pre-created, unmoved
  }
  EXPECT_EQ(p[key("vllm:generation_tokens_total", "1")], 8);
  EXPECT_EQ(p[key("vllm:prompt_tokens_total", "1")], 17);  // 16 bytes and BOS
  EXPECT_EQ(p[key("vllm:prompt_tokens_total", "0")], 0);
}

TEST_F(CompletionsTest, AClientHangingUpMidStreamIsCountedAsAbort) {
  {
    RawSocket c(port_);
    json body = {{"model", "tiny"},
                 {"prompt", "long"},
                 {"n", 2},  // both choices end when the client goes
                 {"max_tokens", 1500},
                 {"ignore_eos", true},
                 {"stream", true}};
    const std::string req =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
        "application/json\r\nContent-Length: " +
        std::to_string(body.dump().size()) + "\r\n\r\n" + body.dump();
    ASSERT_TRUE(c.Send(req));
    ASSERT_FALSE(c.ReadSome(60).empty());  // the stream has started
  }                                        // hang up
  double aborted = 0, running = 1;
  for (int i = 0; i < 50 && (aborted < 2 || running > 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto p = Page();
    aborted = p[Key("vllm:request_success_total", "finished_reason=\"abort\",")];
    running = p[Key("vllm:num_requests_running")];
  }
  EXPECT_EQ(aborted, 2);
  EXPECT_EQ(running, 0);
  EXPECT_EQ(Page()[Key("vllm:request_params_n_count")], 1);
  auto p = Page();
  EXPECT_EQ(p["sightline:stream_outcomes_total{handler=\"/v1/completions\",outcome=\"client_"
              "disconnected\"}"],
            1);
  EXPECT_EQ(p["sightline:stream_outcomes_total{handler=\"/v1/completions\",outcome=\"completed\"}"],
            0);
  // Counted once, with the status its header sent.
  EXPECT_EQ(p["http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"}"],
            1);
  EXPECT_EQ(p["http_request_duration_highr_seconds_count"], 1);
}

// A drain that runs out of time (--shutdown-timeout 0: at once) aborts what
// is still running: the client gets the end of its stream with finish reason
// "abort", the requests count as aborted, the process exits 0.
class ShutdownTimeoutTest : public CompletionsTest {
 protected:
  void SetUp() override {
    extra_api_args_ = {"--shutdown-timeout", "0"};
    CompletionsTest::SetUp();
  }
};

TEST_F(ShutdownTimeoutTest, RequestsCutOffByShutdownEndAndCountAsAborted) {
  RawSocket c(port_);
  json body = {{"model", "tiny"},    {"prompt", "long"},   {"n", 2},
               {"max_tokens", 1500}, {"ignore_eos", true}, {"stream", true}};
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.dump().size()) + "\r\n\r\n" + body.dump();
  ASSERT_TRUE(c.Send(req));
  std::string received = c.ReadSome(60);  // the stream has started
  ASSERT_FALSE(received.empty());
  const int status = api_.KillAndWait(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  received += c.ReadUntil(120);  // until the close: the process has exited
  EXPECT_TRUE(c.eof());
  EXPECT_NE(received.find("\"finish_reason\":\"abort\""), std::string::npos);
  EXPECT_NE(received.find("data: [DONE]"), std::string::npos);

  double running = 1;
  for (int i = 0; i < 50 && running > 0; ++i) {  // the engine dropped them
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    running = Page()[Key("vllm:num_requests_running")];
  }
  auto p = Page();
  EXPECT_EQ(running, 0);
  EXPECT_EQ(p[Key("vllm:request_success_total", "finished_reason=\"abort\",")], 2);
  EXPECT_EQ(p[Key("vllm:request_success_total", "finished_reason=\"length\",")], 0);
  EXPECT_EQ(p[Key("vllm:e2e_request_latency_seconds_count")], 2);
  EXPECT_EQ(p["sightline:stream_outcomes_total{handler=\"/v1/completions\",outcome=\"completed\"}"],
            1);
  EXPECT_EQ(p["http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"}"],
            1);
}

class PerRequestMetricsTest : public CompletionsTest {
 protected:
  void SetUp() override {
    extra_api_args_ = {"--enable-per-request-metrics", "--enable-force-include-usage",
                       "--enable-server-load-tracking"};
    CompletionsTest::SetUp();
  }
};

TEST_F(PerRequestMetricsTest, OnBodiesAndOnTheFinalUsageChunkOnly) {
  const json r = Complete(kGreedy);
  ASSERT_TRUE(r.contains("metrics")) << r.dump();
  const json& m = r["metrics"];
  for (const char* field : {"time_to_first_token_ms", "generation_time_ms", "queue_time_ms",
                            "mean_itl_ms", "tokens_per_second"})
    EXPECT_TRUE(m[field].is_number()) << field;
  EXPECT_NEAR(m["mean_itl_ms"].get<double>(), m["generation_time_ms"].get<double>() / 7, 1e-6);
  EXPECT_GE(m["queue_time_ms"].get<double>(), 0);
  json body = kGreedy;
  body["model"] = "tiny";
  body["stream"] = true;  // no include_usage asked: forced by the flag
  const auto s = HttpClient(port_).Post("/v1/completions", body.dump());
  int with_metrics = 0, usage_chunks = 0;
  for (std::size_t at = 0; (at = s.body().find("data: ", at)) != std::string::npos;) {
    const std::size_t end = s.body().find("\n\n", at);
    const std::string data = s.body().substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") break;
    const json e = json::parse(data);
    with_metrics += e.contains("metrics");
    if (e.contains("usage")) {
      ++usage_chunks;
      EXPECT_TRUE(e.contains("metrics"));
    }
  }
  EXPECT_EQ(usage_chunks, 1);
  EXPECT_EQ(with_metrics, 1);
  // n > 1 or several prompts: no single request to describe (METRICS.md §8).
  json several = kGreedy;
  several["n"] = 2;
  EXPECT_TRUE(Complete(several)["metrics"].is_null());
  several["n"] = 1;
  several["prompt"] = {"a", "b"};
  EXPECT_TRUE(Complete(several)["metrics"].is_null());

  // Responses: on the body, and on the response.completed event only.
  json responses = {
      {"model", "tiny"}, {"input", "Hi"}, {"max_output_tokens", 4}, {"ignore_eos", true}};
  const json answer = json::parse(HttpClient(port_).Post("/v1/responses", responses.dump()).body());
  EXPECT_TRUE(answer["metrics"]["generation_time_ms"].is_number()) << answer.dump();
  responses["stream"] = true;
  const auto events = SseEvents(HttpClient(port_).Post("/v1/responses", responses.dump()).body());
  ASSERT_FALSE(events.empty());
  for (std::size_t i = 0; i + 1 < events.size(); ++i)
    EXPECT_EQ(events[i].find("\"metrics\""), std::string::npos) << events[i];
  const json completed = json::parse(events.back());
  EXPECT_EQ(completed["type"], "response.completed");
  EXPECT_TRUE(completed["response"]["metrics"]["time_to_first_token_ms"].is_number());
}

TEST_F(PerRequestMetricsTest, LoadCountsRequestsBeingAnswered) {
  auto load = [&] {
    return json::parse(HttpClient(port_).Request("GET", "/load").body())["server_load"];
  };
  EXPECT_EQ(load(), 0);
  RawSocket streaming(port_);
  json body = {{"model", "tiny"},
               {"prompt", "x"},
               {"max_tokens", 1900},
               {"ignore_eos", true},
               {"stream", true}};
  const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          std::to_string(body.dump().size()) + "\r\n\r\n" + body.dump();
  ASSERT_TRUE(streaming.Send(req));
  ASSERT_FALSE(streaming.ReadSome(60).empty());
  EXPECT_EQ(load(), 1);
  streaming.Close();  // hang up: aborted, no longer in flight
  int now = 1;
  for (int i = 0; i < 30 && now != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = load();
  }
  EXPECT_EQ(now, 0);
}

}  // namespace
}  // namespace sightline::api
