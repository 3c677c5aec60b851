// The server's numbers held against what its clients saw (issue 13 §6). A
// real `sightline serve` (two API servers, per-request metrics) gets long,
// distinct prompts, so that prefill is large against the noise of a busy
// machine; every request is timed at the client and /metrics is scraped
// before and after. Only relations with margins are asserted, never
// absolute times:
//   * the engine's intervals lie inside the client's: per request, queue +
//     prefill <= the client's TTFT (streamed) and queue + prefill + decode
//     <= its e2e (not streamed); summed, queue + prefill <= the server's
//     TTFT <= the client's, and the server's e2e <= the client's;
//   * prefill is most of what the client waited for, less queueing (it is
//     the forward pass over >= 1,000 tokens); stamping a step's outputs
//     with the step's start made it ~0;
//   * the ITL sum equals the decode-time sum and, within a tolerance, the
//     client's summed gaps between chunks that carry tokens (both telescope
//     to last - first token, so the noise does not accumulate);
//   * counts are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <nlohmann/json.hpp>
#include <random>

#include "e2e/load.h"
#include "e2e/serve_instance.h"

namespace sightline::testing {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// Long enough that prefill (~0.1 s per 1,000 tokens here) dwarfs HTTP and
// IPC overheads; short enough that the file runs in seconds.
constexpr int kPromptChars = 1100;  // the byte tokenizer: one token per char

// One request as the client saw it; times in seconds on the client's clock,
// from just before the request's first byte is written.
struct Seen {
  int status = 0;
  bool done = false;  // streamed: "data: [DONE]" came
  double ttft = -1;   // streamed: first chunk with content
  double e2e = -1;    // the response's last byte
  // streamed: summed gaps from the first content chunk to the last chunk
  // that carries a token (its text, or the finish reason of the last one,
  // whose text may be empty: the tail of an incomplete UTF-8 sequence)
  double gaps = 0;
  json usage, metrics, body;  // usage and per-request metrics (final chunk or body)
  std::string failure;
};

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// What one server-sent event says.
void OnEvent(const std::string& data, double t, double* last, Seen* s) {
  if (data == "[DONE]") {
    s->done = true;
    return;
  }
  const json e = json::parse(data, nullptr, false);
  if (e.is_discarded() || e.contains("error")) {
    s->failure = "bad event: " + data.substr(0, 200);
    return;
  }
  if (e.contains("usage") && e["usage"].is_object()) s->usage = e["usage"];
  if (e.contains("metrics")) s->metrics = e["metrics"];
  bool content = false, finish = false;
  for (const auto& c : e.value("choices", json::array())) {
    finish |= c.contains("finish_reason") && c["finish_reason"].is_string();
    if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty())
      content = true;
    if (c.contains("delta") && c["delta"].contains("content") &&
        c["delta"]["content"].is_string() && !c["delta"]["content"].get<std::string>().empty())
      content = true;
  }
  if (s->ttft < 0 && content) {
    s->ttft = t;
  } else if (s->ttft >= 0 && (content || finish)) {
    s->gaps += t - *last;
  } else {
    return;
  }
  *last = t;
}

// Sends one request on a fresh connection, timestamping bytes as they come.
Seen Send(int port, const std::string& route, const json& body) {
  Seen s;
  try {
    HttpClient client(port);
    const std::map<std::string, std::string> fields = {{"Content-Type", "application/json"}};
    const Clock::time_point sent = Clock::now();
    if (!body.value("stream", false)) {  // one body: only its end is timed
      const HttpClient::Response res = client.Request("POST", route, fields, body.dump());
      s.e2e = Since(sent);
      s.status = res.result_int();
      s.body = json::parse(res.body(), nullptr, false);
      if (s.body.is_object()) {
        s.usage = s.body.value("usage", json());
        s.metrics = s.body.value("metrics", json());
      }
      if (s.status != 200) s.failure = "status " + std::to_string(s.status) + ": " + res.body();
      return s;
    }
    std::string pending;
    double last = 0;
    s.status =
        client
            .Stream("POST", route, fields, body.dump(),
                    [&](std::string_view piece) {
                      const double t = Since(sent);
                      pending.append(piece);
                      for (std::size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
                        const std::string event = pending.substr(0, end);
                        pending.erase(0, end + 2);
                        if (event.rfind("data: ", 0) == 0) OnEvent(event.substr(6), t, &last, &s);
                      }
                    })
            .result_int();
    s.e2e = Since(sent);
    if (s.status != 200) s.failure = "status " + std::to_string(s.status) + ": " + pending;
  } catch (const std::exception& e) {
    s.failure = e.what();
  }
  return s;
}

// Lowercase letters from `seed`: every prompt distinct from its first
// block on, so the prefix cache never shortens a prefill.
std::string Prompt(int seed) {
  std::mt19937 rng(static_cast<unsigned>(seed) * 7919u + 1);
  std::string p(kPromptChars, 'a');
  for (char& c : p) c = static_cast<char>('a' + rng() % 26);
  return p;
}

json Body(const std::string& route, int seed, int max_tokens, bool stream) {
  json b = {
      {"max_tokens", max_tokens}, {"ignore_eos", true}, {"temperature", 0}, {"stream", stream}};
  if (stream) b["stream_options"] = {{"include_usage", true}};
  if (route == "/v1/chat/completions")
    b["messages"] = json::array({{{"role", "user"}, {"content", Prompt(seed)}}});
  else
    b["prompt"] = Prompt(seed);
  return b;
}

const std::string kCompletions = "/v1/completions", kChat = "/v1/chat/completions";

std::string Http(const std::string& handler) {
  return "http_requests_total{handler=\"" + handler + "\",method=\"POST\",status=\"2xx\"}";
}

// A live instance and the page before the requests; Delta() reads the page
// once every request the test sent is counted as finished.
class Truth : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(serve_.port(), 0) << serve_.Log();
    before_ = Scrape(serve_.port());
  }
  // Sends `bodies` from `clients` threads at once (2: the engine's queue and
  // both API servers see concurrent work), each on a fresh connection.
  std::vector<Seen> SendAll(const std::vector<std::pair<std::string, json>>& bodies,
                            std::size_t clients) {
    std::vector<Seen> seen(bodies.size());
    auto client = [&](std::size_t first) {
      for (std::size_t i = first; i < bodies.size(); i += clients)
        seen[i] = Send(serve_.port(), bodies[i].first, bodies[i].second);
    };
    std::vector<std::future<void>> others;
    for (std::size_t c = 1; c < clients; ++c)
      others.push_back(std::async(std::launch::async, client, c));
    client(0);
    for (auto& o : others) o.get();
    return seen;
  }
  // The page once `n` more requests finished (length) than before.
  void ScrapeAfter(std::size_t n) {
    const std::string done = Key("vllm:request_success_total", "finished_reason=\"length\",");
    ASSERT_TRUE(WaitForPage(serve_.port(), [&](auto p) {
      return p[done] - before_[done] == static_cast<double>(n);
    })) << Scrape(serve_.port())[done] - before_[done];
    after_ = Scrape(serve_.port());
  }
  double Delta(const std::string& key) { return after_[key] - before_[key]; }
  double Sum(const std::string& family) { return Delta(Key(family + "_sum")); }

  // Exact counts: requests, tokens (from each response's usage), the
  // observations of every latency family, the HTTP family per route.
  void ExpectExactCounts(const std::vector<std::pair<std::string, json>>& bodies,
                         const std::vector<Seen>& seen) {
    double prompt = 0, generated = 0, itl = 0, completions = 0, chat = 0;
    for (std::size_t i = 0; i < seen.size(); ++i) {
      prompt += seen[i].usage.value("prompt_tokens", 0.0);
      const double n = seen[i].usage.value("completion_tokens", 0.0);
      EXPECT_EQ(n, bodies[i].second["max_tokens"].get<double>());
      generated += n;
      itl += n - 1;
      (bodies[i].first == kChat ? chat : completions) += 1;
    }
    const double n = static_cast<double>(seen.size());
    EXPECT_EQ(Delta(Key("vllm:request_success_total", "finished_reason=\"length\",")), n);
    EXPECT_EQ(Delta(Key("vllm:prompt_tokens_total")), prompt);
    EXPECT_EQ(Delta(Key("vllm:generation_tokens_total")), generated);
    for (const char* family :
         {"vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
          "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
          "vllm:request_decode_time_seconds"})
      EXPECT_EQ(Delta(Key(std::string(family) + "_count")), n) << family;
    EXPECT_EQ(Delta(Key("vllm:inter_token_latency_seconds_count")), itl);
    EXPECT_EQ(Delta(Http(kCompletions)), completions);
    EXPECT_EQ(Delta(Http(kChat)), chat);
  }

  ServeInstance serve_{{"--api-server-count", "2", "--enable-per-request-metrics"}};
  std::map<std::string, double> before_, after_;
};

double Ms(const json& metrics, const char* field) {
  return metrics.contains(field) && metrics[field].is_number() ? metrics[field].get<double>() : -1;
}

// One request at a time: a decode step that also ran another request's
// prefill stalls, and a stall right after a first token whose text the
// server held back would be invisible to the client's gaps.
TEST_F(Truth, StreamedIntervalsLieInsideWhatTheClientSaw) {
  constexpr int kMax = 256;  // decode long enough to stand out of scheduling noise
  std::vector<std::pair<std::string, json>> bodies;
  for (int i = 0; i < 6; ++i) {
    const std::string& route = i % 3 == 2 ? kChat : kCompletions;
    bodies.emplace_back(route, Body(route, i, kMax, true));
  }
  const std::vector<Seen> seen = SendAll(bodies, 1);
  double ttft = 0, gaps = 0, e2e = 0;
  for (const Seen& s : seen) {
    ASSERT_TRUE(s.failure.empty() && s.done) << s.failure;
    ttft += s.ttft;
    gaps += s.gaps;
    e2e += s.e2e;
    // Per request (engine clock, ms): queue + prefill happened between the
    // client's send and its first chunk; decode between its first chunk and
    // its last byte, give or take how late the first chunk was delivered.
    const double queue = Ms(s.metrics, "queue_time_ms"),
                 prefill = Ms(s.metrics, "time_to_first_token_ms"),
                 decode = Ms(s.metrics, "generation_time_ms");
    ASSERT_GE(queue, 0) << s.metrics.dump();
    EXPECT_GT(prefill, 0) << s.metrics.dump();
    EXPECT_LE(queue + prefill, s.ttft * 1e3) << s.metrics.dump();
    EXPECT_GT(decode, 0) << s.metrics.dump();
    EXPECT_LE(decode, (s.e2e - s.ttft) * 1e3 + 40) << s.metrics.dump();
    EXPECT_NEAR(Ms(s.metrics, "mean_itl_ms"), decode / (kMax - 1), 1e-6);
    EXPECT_GT(Ms(s.metrics, "tokens_per_second"), 0) << s.metrics.dump();
  }
  ScrapeAfter(seen.size());
  ExpectExactCounts(bodies, seen);

  const double queue = Sum("vllm:request_queue_time_seconds"),
               prefill = Sum("vllm:request_prefill_time_seconds"),
               decode = Sum("vllm:request_decode_time_seconds"),
               itl = Sum("vllm:inter_token_latency_seconds"),
               server_ttft = Sum("vllm:time_to_first_token_seconds"),
               server_e2e = Sum("vllm:e2e_request_latency_seconds");
  const std::string numbers = "client TTFT " + std::to_string(ttft) + " s, gaps " +
                              std::to_string(gaps) + ", e2e " + std::to_string(e2e) +
                              "; server queue " + std::to_string(queue) + ", prefill " +
                              std::to_string(prefill) + ", decode " + std::to_string(decode) +
                              ", ITL " + std::to_string(itl) + ", TTFT " +
                              std::to_string(server_ttft) + ", e2e " + std::to_string(server_e2e);
  // Nested intervals, summed.
  EXPECT_LE(queue + prefill, server_ttft) << numbers;
  EXPECT_LE(server_ttft, ttft) << numbers;
  EXPECT_LE(server_e2e, e2e) << numbers;
  // Prefill is most of what the client waited for beyond queueing.
  EXPECT_GE(prefill, 0.3 * (ttft - queue)) << numbers;
  // Every ITL is a gap between two of the request's token timestamps.
  EXPECT_NEAR(itl, decode, 1e-3) << numbers;
  // The client's gaps telescope to its first content to its last token: the
  // same interval seen after delivery, give or take delivery jitter. Gaps
  // after a first token whose text was held back (an incomplete UTF-8
  // sequence) are invisible to the client but in its TTFT, not the
  // server's. Stamps before the forward pass added each prefill.
  const double tolerance = 0.25 * gaps + 0.010 * static_cast<double>(seen.size());
  EXPECT_GE(itl, gaps - tolerance) << numbers;
  EXPECT_LE(itl, gaps + tolerance + std::max(0.0, ttft - server_ttft)) << numbers;
}

TEST_F(Truth, NonStreamedIntervalsLieInsideWhatTheClientSaw) {
  constexpr int kMax = 16;
  std::vector<std::pair<std::string, json>> bodies;
  for (int i = 0; i < 6; ++i) {
    const std::string& route = i % 3 == 2 ? kChat : kCompletions;
    bodies.emplace_back(route, Body(route, 100 + i, kMax, false));
  }
  const std::vector<Seen> seen = SendAll(bodies, 2);
  double e2e = 0, inside = 0;
  for (const Seen& s : seen) {
    ASSERT_TRUE(s.failure.empty()) << s.failure;
    e2e += s.e2e;
    // Without chunks the client knows only e2e: queue, prefill and decode
    // (engine clock) all happened inside it.
    const double queue = Ms(s.metrics, "queue_time_ms"),
                 prefill = Ms(s.metrics, "time_to_first_token_ms"),
                 decode = Ms(s.metrics, "generation_time_ms");
    ASSERT_GE(queue, 0) << s.metrics.dump();
    EXPECT_GT(prefill, 0) << s.metrics.dump();
    EXPECT_GT(decode, 0) << s.metrics.dump();
    EXPECT_LE(queue + prefill + decode, s.e2e * 1e3) << s.metrics.dump();
    EXPECT_GT(Ms(s.metrics, "tokens_per_second"), 0) << s.metrics.dump();
    inside += (queue + prefill) / 1e3;
  }
  ScrapeAfter(seen.size());
  ExpectExactCounts(bodies, seen);
  const double queue = Sum("vllm:request_queue_time_seconds"),
               prefill = Sum("vllm:request_prefill_time_seconds"),
               decode = Sum("vllm:request_decode_time_seconds");
  // The histograms observed what the bodies said (the same timestamps).
  EXPECT_NEAR(queue + prefill, inside, 1e-3);
  EXPECT_LE(queue + prefill + decode, Sum("vllm:e2e_request_latency_seconds"));
  EXPECT_LE(Sum("vllm:e2e_request_latency_seconds"), e2e);
  // Prefill over 1,100 tokens is a substantial part of each request.
  EXPECT_GE(prefill, 0.3 * (e2e - queue - decode));
}

// One token: prefill is the whole generation, so TTFT is the whole
// inference and the rate is defined; decode and TPOT are 0.
TEST_F(Truth, OneTokenRequestsHaveAFirstTokenTimeAndARate) {
  std::vector<std::pair<std::string, json>> bodies;
  for (int i = 0; i < 4; ++i)
    bodies.emplace_back(kCompletions, Body(kCompletions, 200 + i, 1, i % 2 == 1));
  const std::vector<Seen> seen = SendAll(bodies, 2);
  double ttft = 0;
  for (const Seen& s : seen) {
    ASSERT_TRUE(s.failure.empty()) << s.failure;
    const double prefill = Ms(s.metrics, "time_to_first_token_ms");
    EXPECT_GT(prefill, 0) << s.metrics.dump();
    EXPECT_LE(Ms(s.metrics, "queue_time_ms") + prefill, (s.ttft > 0 ? s.ttft : s.e2e) * 1e3)
        << s.metrics.dump();
    EXPECT_EQ(Ms(s.metrics, "generation_time_ms"), 0) << s.metrics.dump();
    EXPECT_TRUE(s.metrics["mean_itl_ms"].is_null()) << s.metrics.dump();
    // n / (last token - first scheduled) = 1 / prefill.
    EXPECT_GT(Ms(s.metrics, "tokens_per_second"), 0) << s.metrics.dump();
    EXPECT_NEAR(Ms(s.metrics, "tokens_per_second"), 1e3 / prefill, 1e-6 * 1e3 / prefill)
        << s.metrics.dump();
    ttft += s.ttft > 0 ? s.ttft : s.e2e;
  }
  ScrapeAfter(seen.size());
  ExpectExactCounts(bodies, seen);
  EXPECT_EQ(Sum("vllm:request_decode_time_seconds"), 0);
  EXPECT_EQ(Sum("vllm:request_time_per_output_token_seconds"), 0);
  EXPECT_GE(Sum("vllm:request_prefill_time_seconds"),
            0.3 * (ttft - Sum("vllm:request_queue_time_seconds")));
}

}  // namespace
}  // namespace sightline::testing
