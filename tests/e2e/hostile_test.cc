// The hostile suite: `sightline serve` attacked as a hostile client and as an
// operator whose processes stall and crash would. Each test is one class of
// defect that once ended a process, hung a stream or crossed two users'
// tokens; after each abusive phase the instance must still be whole: a
// normal completion works, no process died (the same pids), and every
// /metrics page parses with no counter, histogram or summary going down.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "e2e/load.h"
#include "e2e/serve_instance.h"
#include "support/raw_http.h"

namespace sightline::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kRunning = Key("vllm:num_requests_running");
const std::string kWaiting = Key("vllm:num_requests_waiting");
const std::string kAborted = Key("vllm:request_success_total", "finished_reason=\"abort\",");

// An instance under attack, and the invariants every phase must leave intact.
class Hostile : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> args) {
    serve_ = std::make_unique<ServeInstance>(args);
    ASSERT_GT(serve_->port(), 0) << serve_->Log();
    pids_ = serve_->Children();
    scraper_ = std::make_unique<Scraper>(serve_->port());
  }
  void TearDown() override {
    if (scraper_) scraper_->Stop();
  }
  int port() const { return serve_->port(); }

  // The instance is whole: same processes, a normal completion (streamed
  // and not) succeeds, and no scraped page broke a counter.
  void ExpectWhole(const std::string& phase) {
    SCOPED_TRACE(phase);
    EXPECT_EQ(serve_->Children(), pids_) << "a process died or was restarted\n" << serve_->Log();
    for (bool stream : {false, true}) {
      const Outcome o = Complete(port(), 8, 4, stream);
      EXPECT_TRUE(o.ok) << o.failure;
    }
    const auto problems = scraper_->problems();
    EXPECT_TRUE(problems.empty()) << problems.front();
    try {
      const std::string page = HttpClient(port()).Request("GET", "/metrics").body();
      scraper_->Check(page);  // parses, and nothing went down since the last page
    } catch (const std::exception& e) {
      ADD_FAILURE() << "/metrics: " << e.what();
    }
  }

  // POSTs `body` to `path` and returns (status, parsed body or null).
  std::pair<int, json> Post(const std::string& path, const std::string& body) {
    auto r = HttpClient(port()).Post(path, body);
    return {r.result_int(), json::parse(r.body(), nullptr, false)};
  }

  std::unique_ptr<ServeInstance> serve_;
  std::vector<pid_t> pids_;
  std::unique_ptr<Scraper> scraper_;
};

// An OpenAI error body: {"error": {"message": string, "type": string, ...}}.
void ExpectErrorBody(const json& j, const std::string& context) {
  ASSERT_TRUE(j.is_object() && j.contains("error") && j["error"].is_object()) << context;
  EXPECT_TRUE(j["error"]["message"].is_string()) << context;
  EXPECT_TRUE(j["error"]["type"].is_string()) << context;
}

// §1: the raw target once went into an error message that could not be
// serialised; std::terminate. Far more than the restart cap (about eleven).
TEST_F(Hostile, InvalidUtf8InTheTargetIsAnErrorNotACrash) {
  Start({"--api-server-count", "2"});
  const std::vector<std::string> requests = {
      "GET /\xff HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
      "POST /v1/\xc3\x28 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
      "PUT /\x80 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
      "GET /nowhere?\xfe\xff HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
      "DELETE /v1/completions HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"};
  for (int round = 0; round < 8; ++round)
    for (const std::string& request : requests) {
      const std::string wire = RawExchange(port(), request);
      const int status = StatusOf(wire);
      EXPECT_TRUE(status == 400 || status == 404 || status == 405) << wire;
      ExpectErrorBody(json::parse(BodyOf(wire), nullptr, false), wire);
    }
  ExpectWhole("after 40 invalid targets");
}

// §1: every field of every body is type-checked; a wrong type is a 400
// naming the field, never an exception.
TEST_F(Hostile, WrongTypedFieldsAre400sNamingTheField) {
  Start({"--api-server-count", "2"});
  const std::string msg = R"("messages":[{"role":"user","content":"x"}])";
  struct Case {
    std::string path, body, field;
  };
  const std::vector<Case> cases = {
      {"/v1/completions",
       R"({"prompt":"x","stream":true,"stream_options":{"include_usage":"yes"}})", "include_usage"},
      {"/v1/chat/completions", "{" + msg + R"(,"add_generation_prompt":"yes"})",
       "add_generation_prompt"},
      {"/tokenize", "{" + msg + R"(,"add_generation_prompt":"yes"})", "add_generation_prompt"},
      {"/v1/chat/completions",
       R"({"messages":[{"role":"user","content":[{"type":5,"text":"x"}]}]})", "type"},
      {"/v1/responses", R"({"input":[{"role":"user","content":[{"type":5,"text":"x"}]}]})", "type"},
      {"/v1/completions", R"({"prompt":"x","max_tokens":1.5})", "max_tokens"},
      {"/v1/completions", R"({"prompt":"x","n":"2"})", "n"},
      {"/v1/completions", R"({"prompt":"x","seed":0.5})", "seed"},
      {"/v1/completions", R"({"prompt":"x","stop_token_ids":["a"]})", "stop_token_ids"},
      {"/v1/completions", R"({"prompt":"x","stop":[1]})", "stop"},
      {"/v1/chat/completions", R"({"messages":[{"role":5,"content":"x"}]})", "role"},
      {"/v1/chat/completions", R"({"messages":"x"})", "messages"},
      {"/v1/responses", R"({"input":"x","instructions":5})", "instructions"},
      {"/detokenize", R"({"tokens":[1,"2"]})", "tokens"},
  };
  for (int round = 0; round < 2; ++round)
    for (const Case& c : cases) {
      const auto [status, j] = Post(c.path, c.body);
      const std::string context = c.path + " " + c.body + " -> " + j.dump();
      EXPECT_EQ(status, 400) << context;
      ExpectErrorBody(j, context);
      if (!j.is_object() || !j.contains("error")) continue;
      ASSERT_TRUE(j["error"]["param"].is_string()) << context;
      EXPECT_NE(j["error"]["param"].get<std::string>().find(c.field), std::string::npos) << context;
    }
  ExpectWhole("after wrong-typed fields");
}

// §4: values of the right JSON type that vLLM and OpenAI still refuse.
TEST_F(Hostile, InconsistentParametersAre400s) {
  Start({});
  for (const std::string& body : {
           std::string(R"({"prompt":"x","min_tokens":8,"max_tokens":4})"),
           std::string(R"({"prompt":"x","stream_options":{"include_usage":true}})"),
           std::string(R"({"prompt":"x","stop_token_ids":[-1]})"),
           std::string(R"({"prompt":"x","stop_token_ids":[99999999]})"),
           std::string(R"({"prompt":"x","logprobs":21})"),  // above --max-logprobs
           std::string(R"({"prompt":"x","prompt_logprobs":1,"stream":true})"),
           std::string(R"({"prompt":"x","stop":[""]})"),
       }) {
    const auto [status, j] = Post("/v1/completions", body);
    EXPECT_EQ(status, 400) << body << " -> " << j.dump();
    ExpectErrorBody(j, body);
  }
  const auto [status, j] = Post("/v1/chat/completions",
                                R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})");
  EXPECT_EQ(status, 400) << j.dump();
  ExpectWhole("after inconsistent parameters");
}

// §1: 100k levels of nesting once overflowed the stack in a recursive dump.
TEST_F(Hostile, DeepNestingIsRefusedAtParseTime) {
  Start({"--api-server-count", "2"});
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/chat/completions", R"({"messages":)" + deep + "}"},
      {"/tokenize", R"({"messages":)" + deep + "}"},
      {"/v1/responses", R"({"input":"x","metadata":)" + deep + "}"},
      {"/v1/completions", R"({"prompt":"x","user":)" + deep + "}"},
      {"/detokenize", R"({"tokens":)" + deep + "}"},
  };
  for (const auto& [path, body] : cases) {
    const auto [status, j] = Post(path, body);
    EXPECT_EQ(status, 400) << path;
    ExpectErrorBody(j, path);
  }
  ExpectWhole("after deep nesting");
}

// §1: stop strings are capped, and matching many of them costs no more per
// token than matching one.
TEST_F(Hostile, StopStringsAreCappedAndStayCheap) {
  Start({});
  json flood = {{"prompt", "x"}, {"n", 8}, {"max_tokens", 64}, {"ignore_eos", true}};
  flood["stop"] = json::array();
  for (int i = 0; i < 100'000; ++i) flood["stop"].push_back("s" + std::to_string(i));
  const auto [status, j] = Post("/v1/completions", flood.dump());
  EXPECT_EQ(status, 400);
  ExpectErrorBody(j, "100k stop strings");

  // The most the caps allow, n = 8, streamed: it completes.
  json most = {{"prompt", "x"},      {"n", 8},         {"max_tokens", 256},
               {"ignore_eos", true}, {"stream", true}, {"temperature", 1.0}};
  most["stop"] = json::array();
  for (int i = 0; i < 64; ++i) most["stop"].push_back(std::string(1000, 'a' + i % 26) + "!");
  auto r = HttpClient(port()).Post("/v1/completions", most.dump());
  EXPECT_EQ(r.result_int(), 200) << r.body().substr(0, 300);
  EXPECT_TRUE(r.body().ends_with("data: [DONE]\n\n"));
  ExpectWhole("after the stop-string flood");
}

// §3: HTTP as clients and proxies expect it (RFC 9110/9112).
TEST_F(Hostile, HttpFramingAsTheRfcsSay) {
  Start({});
  const std::string body = R"({"prompt":"hi","max_tokens":4,"stream":true})";
  const std::string length = std::to_string(body.size());
  // HTTP/1.0 gets no chunked encoding: the stream is delimited by the close.
  const std::string one_oh = RawExchange(
      port(),
      "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
          length + "\r\n\r\n" + body);
  EXPECT_EQ(StatusOf(one_oh), 200) << one_oh;
  EXPECT_EQ(HeadOf(one_oh).find("chunked"), std::string::npos) << one_oh;
  EXPECT_TRUE(BodyOf(one_oh).ends_with("data: [DONE]\n\n")) << one_oh;
  // HTTP/1.1 needs Host.
  EXPECT_EQ(StatusOf(RawExchange(port(), "GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")),
            400);
  // Absolute-form targets route by their path.
  EXPECT_EQ(StatusOf(RawExchange(port(),
                                 "GET http://a/health HTTP/1.1\r\nHost: a\r\n"
                                 "Connection: close\r\n\r\n")),
            200);
  // A transfer coding we do not implement is refused, never misframed.
  const std::string gzip =
      RawExchange(port(),
                  "POST /v1/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n"
                  "Connection: close\r\n\r\nxxxx");
  EXPECT_EQ(StatusOf(gzip), 501) << gzip;
  // Expect: 100-continue is answered before the body is sent.
  {
    RawSocket c(port());
    ASSERT_TRUE(
        c.Send("POST /tokenize HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
               "Expect: 100-continue\r\nContent-Length: 15\r\n\r\n"));
    const std::string interim = c.ReadUntil(5, "\r\n\r\n");
    EXPECT_EQ(StatusOf(interim), 100) << interim;
    ASSERT_TRUE(c.Send(R"({"prompt":"hi"})"));
    const std::string rest = c.ReadUntil(5, "}");
    EXPECT_NE(rest.find("200 OK"), std::string::npos) << rest;
  }
  // HEAD: the GET answer's head, no body.
  const std::string head =
      RawExchange(port(), "HEAD /v1/models HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  EXPECT_TRUE(StatusOf(head) == 200 || StatusOf(head) == 405) << head;
  EXPECT_EQ(BodyOf(head), "") << head;
  if (StatusOf(head) == 405) {
    EXPECT_NE(head.find("Allow:"), std::string::npos);
  }
  ExpectWhole("after the framing checks");
}

TEST_F(Hostile, BearerIsCaseInsensitiveAnd401sSayBearer) {
  Start({"--api-key", "sekret"});
  auto r = HttpClient(port()).Request("GET", "/v1/models");
  EXPECT_EQ(r.result_int(), 401);
  EXPECT_EQ(r["WWW-Authenticate"], "Bearer");
  for (const std::string scheme : {"Bearer", "bearer", "BEARER"})
    EXPECT_EQ(HttpClient(port())
                  .Request("GET", "/v1/models", {{"Authorization", scheme + " sekret"}})
                  .result_int(),
              200)
        << scheme;
}

// §3: a flood of idle connections once made a fresh /health time out.
TEST_F(Hostile, HealthAnswersUnderAConnectionFlood) {
  rlimit nofile{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
  if (nofile.rlim_max < 3000) GTEST_SKIP() << "RLIMIT_NOFILE hard limit " << nofile.rlim_max;
  // The instance starts with the usual soft limit of 1024, as under a shell
  // or a supervisor that sets none; it must raise its own to the hard limit.
  const rlimit usual{1024, nofile.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &usual), 0);
  Start({});
  nofile.rlim_cur = nofile.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &nofile), 0);
  std::vector<RawSocket> idle;
  for (int i = 0; i < 2500; ++i) {
    idle.emplace_back(port());
    if (!idle.back().ok()) break;
  }
  EXPECT_GE(idle.size(), 2000u);
  const auto t0 = Clock::now();
  const std::string wire =
      RawExchange(port(), "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", 10);
  EXPECT_TRUE(StatusOf(wire) == 200 || StatusOf(wire) == 503) << wire;
  EXPECT_LT(Clock::now() - t0, 5s) << "hang guard";
  idle.clear();
  EXPECT_TRUE(WaitForPage(
      port(), [](auto) { return true; }, 10s));
  ExpectWhole("after 2000 idle connections");
}

// The text and finish reason of choice 0 of a streamed completion, from its
// server-sent events; `done` is false unless the stream ended with [DONE].
struct Streamed {
  int status = 0;
  std::string text, finish_reason, failure;
  bool done = false;
};
Streamed Stream(int port, const std::string& prompt, int max_tokens) {
  Streamed s;
  try {
    const json body = {{"prompt", prompt},
                       {"max_tokens", max_tokens},
                       {"ignore_eos", true},
                       {"temperature", 0},
                       {"stream", true}};
    auto r = HttpClient(port).Post("/v1/completions", body.dump());
    s.status = r.result_int();
    std::istringstream in(r.body());
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("data: ", 0) != 0) continue;
      if (line == "data: [DONE]") {
        s.done = true;
        continue;
      }
      const json e = json::parse(line.substr(6), nullptr, false);
      if (!e.is_object() || !e.contains("choices")) continue;
      for (const json& c : e["choices"]) {
        s.text += c.value("text", "");
        if (c.contains("finish_reason") && c["finish_reason"].is_string())
          s.finish_reason = c["finish_reason"];
      }
    }
  } catch (const std::exception& e) {
    s.failure = e.what();
  }
  return s;
}

std::string Solo(int port, const std::string& prompt, int max_tokens) {
  const json body = {
      {"prompt", prompt}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"temperature", 0}};
  const json j = json::parse(HttpClient(port).Post("/v1/completions", body.dump()).body());
  return j["choices"][0]["text"];
}

// §2: a restarted API server once got request ids its predecessor had in
// flight, and the first event of a new stream could carry another user's
// token. Long requests keep the predecessor's work running in the engine
// when the new incarnation appears.
TEST_F(Hostile, ARestartedApiServerNeverSeesItsPredecessorsTokens) {
  Start({"--max-num-seqs", "16"});
  constexpr int kOld = 48, kOldTokens = 1900, kNew = 8, kNewTokens = 1500;
  std::vector<std::string> fresh, expected;
  for (int i = 0; i < kNew; ++i) fresh.push_back("new prompt " + std::to_string(i));
  for (const std::string& p : fresh) expected.push_back(Solo(port(), p, kNewTokens));
  const double aborted_before = Scrape(port())[kAborted];

  std::vector<std::future<Streamed>> old;
  for (int i = 0; i < kOld; ++i)
    old.push_back(std::async(std::launch::async, [this, i] {
      return Stream(port(), "old prompt " + std::to_string(i), kOldTokens);
    }));
  ASSERT_TRUE(WaitForPage(port(), [](auto p) { return p[kRunning] + p[kWaiting] >= kOld; }));
  const pid_t victim = serve_->Child("--api-server-index 0");
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  for (auto& f : old) EXPECT_FALSE(f.get().done);  // their connections died with the victim

  // The new incarnation: serving as soon as /health answers.
  pid_t successor = -1;
  for (int i = 0; i < 200; ++i) {
    successor = serve_->Child("--api-server-index 0");
    bool up = false;
    if (successor > 0 && successor != victim) {
      try {
        up = HttpClient(port()).Request("GET", "/health").result_int() == 200;
      } catch (const std::exception&) {
      }
    }
    if (up) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_NE(successor, victim);
  std::vector<std::future<Streamed>> streams;
  for (const std::string& p : fresh)
    streams.push_back(
        std::async(std::launch::async, [this, p] { return Stream(port(), p, kNewTokens); }));
  // The predecessor's requests end at once, as aborts.
  EXPECT_TRUE(WaitForPage(
      port(), [&](auto p) { return p[kAborted] - aborted_before == kOld; }, 2s))
      << Scrape(port())[kAborted] - aborted_before << " aborted";
  for (int i = 0; i < kNew; ++i) {
    const Streamed s = streams[i].get();
    EXPECT_TRUE(s.done) << s.failure;
    EXPECT_EQ(s.finish_reason, "length");
    EXPECT_EQ(s.text, expected[i]) << "stream " << i << " carried text that is not its own";
  }
  EXPECT_TRUE(WaitForPage(
      port(), [](auto p) { return p[kRunning] == 0; }, 2s));
  pids_ = serve_->Children();
  ExpectWhole("after the restart");
}

// §2: after a stall longer than the heartbeat timeout the engine has dropped
// the stalled server's requests; their streams must end (as aborts), not
// wait forever.
TEST_F(Hostile, StreamsOfAStalledApiServerEndAsAborts) {
  Start({"--max-num-seqs", "16"});
  constexpr int kStreams = 32, kTokens = 1900;
  const double aborted_before = Scrape(port())[kAborted];
  std::vector<std::future<Streamed>> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.push_back(std::async(std::launch::async, [this, i] {
      return Stream(port(), "stalled " + std::to_string(i), kTokens);
    }));
  ASSERT_TRUE(WaitForPage(port(), [](auto p) { return p[kRunning] + p[kWaiting] >= kStreams; }));
  const pid_t api = serve_->Child("--api-server-index 0");
  ASSERT_EQ(kill(api, SIGSTOP), 0);
  std::this_thread::sleep_for(3500ms);
  ASSERT_EQ(kill(api, SIGCONT), 0);
  for (auto& f : streams)
    if (f.wait_for(10s) != std::future_status::ready) {
      ADD_FAILURE() << "a stream outlived its request";
      kill(api, SIGKILL);  // ends the hung streams, so that the test can end
      break;
    }
  int aborts = 0;
  for (auto& f : streams) {
    const Streamed s = f.get();
    EXPECT_TRUE(s.done) << s.failure;
    EXPECT_TRUE(s.finish_reason == "abort" || s.finish_reason == "length") << s.finish_reason;
    aborts += s.finish_reason == "abort";
  }
  EXPECT_GT(aborts, 0);
  EXPECT_TRUE(WaitForPage(
      port(), [&](auto p) { return p[kAborted] - aborted_before == aborts; }, 5s));
  EXPECT_TRUE(WaitForPage(
      port(), [](auto p) { return p[kRunning] == 0; }, 2s));
  ExpectWhole("after a 3.5 s stall");
}

// §2: /health follows the engine's liveness, like vLLM's check_health.
TEST_F(Hostile, HealthIs503WhileTheEngineIsFrozen) {
  Start({});
  const pid_t engine = serve_->Child(" engine ");
  ASSERT_GT(engine, 0);
  auto health = [this]() -> int {
    try {
      return static_cast<int>(HttpClient(port()).Request("GET", "/health").result_int());
    } catch (const std::exception&) {
      return 0;
    }
  };
  ASSERT_EQ(health(), 200);
  ASSERT_EQ(kill(engine, SIGSTOP), 0);
  bool unhealthy = false;
  for (int i = 0; i < 200 && !unhealthy; ++i) {
    unhealthy = health() == 503;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(kill(engine, SIGCONT), 0);
  EXPECT_TRUE(unhealthy) << "/health stayed 200 for 10 s with the engine stopped";
  bool healthy = false;
  for (int i = 0; i < 100 && !healthy; ++i) {
    healthy = health() == 200;
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(healthy);
  ExpectWhole("after the engine was frozen");
}

}  // namespace
}  // namespace sightline::testing
