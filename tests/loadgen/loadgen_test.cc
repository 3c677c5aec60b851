// The load generator's parts: statistics, arrivals, workloads, dataset
// loading, reading /metrics back, and the server-vs-client comparison.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <thread>

#include "sightline/loadgen/compare.h"
#include "sightline/loadgen/exposition.h"
#include "sightline/loadgen/runner.h"
#include "sightline/loadgen/stats.h"
#include "sightline/loadgen/workload.h"
#include "support/loopback.h"

namespace sightline::loadgen {
namespace {

TEST(Stats, PercentilesInterpolateLikeNumpy) {
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 100), 4);
  EXPECT_NEAR(Percentile({1, 2, 3, 4}, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 50)));
  const Summary s = Summarize({1, 2, 3, 4});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
}

TEST(Stats, TpotExcludesRequestsOfOneTokenOrNone) {
  RequestResult r;
  r.ttft = 0.1;
  r.e2e = 0.5;
  r.output_tokens = 5;
  EXPECT_NEAR(Tpot(r), 0.1, 1e-12);
  r.output_tokens = 1;
  EXPECT_LT(Tpot(r), 0);
  r.output_tokens = 0;
  EXPECT_LT(Tpot(r), 0);
  r.output_tokens = 5;
  r.ttft = -1;  // never saw a token
  EXPECT_LT(Tpot(r), 0);
}

TEST(Stats, AggregateCountsFailuresByReasonAndSkipsThem) {
  std::vector<RequestResult> rs(4);
  rs[0] = {true, "", "length", 10, 5, 0.1, 0.5, {0.1, 0.1, 0.1, 0.1}};
  rs[1] = {true, "", "stop", 10, 1, 0.2, 0.2, {}};  // one token: no TPOT
  rs[2].failure = "HTTP 400: bad";
  rs[3].failure = "HTTP 400: bad";
  const RunStats s = Aggregate(rs, 2.0);
  EXPECT_EQ(s.ok, 2u);
  EXPECT_EQ(s.failed, 2u);
  EXPECT_EQ(s.failures.at("HTTP 400: bad"), 2u);
  EXPECT_EQ(s.prompt_tokens, 20u);
  EXPECT_EQ(s.output_tokens, 6u);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 3.0);
  EXPECT_EQ(s.tpot.count, 1u);
  EXPECT_EQ(s.itl.count, 4u);
  EXPECT_EQ(s.ttft.count, 2u);
}

TEST(Arrivals, PoissonIsSeededWithTheRightMeanAndInfinityIsAllAtOnce) {
  const auto a = ArrivalTimes(20000, 50, 7), b = ArrivalTimes(20000, 50, 7);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, ArrivalTimes(20000, 50, 8));
  EXPECT_EQ(a[0], 0);
  for (std::size_t i = 1; i < a.size(); ++i) ASSERT_GE(a[i], a[i - 1]);
  const double mean_gap = a.back() / static_cast<double>(a.size() - 1);
  EXPECT_NEAR(mean_gap, 1.0 / 50, 0.05 / 50);
  // Exponential gaps: the standard deviation equals the mean.
  double sq = 0;
  for (std::size_t i = 1; i < a.size(); ++i) sq += std::pow(a[i] - a[i - 1] - mean_gap, 2);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(a.size() - 2)), mean_gap, 0.05 * mean_gap);
  for (double t : ArrivalTimes(10, std::numeric_limits<double>::infinity(), 1)) EXPECT_EQ(t, 0);
}

TEST(Workload, RandomLengthsStayInRangeAndAreSeeded) {
  RandomOptions o;
  o.input_len = 100;
  o.output_len = 20;
  o.range_ratio = 0.5;
  o.seed = 3;
  const auto w = RandomWorkload(o, 500);
  ASSERT_EQ(w.size(), 500u);
  std::set<std::size_t> lengths;
  for (const auto& r : w) {
    ASSERT_GE(r.prompt_ids.size(), 50u);
    ASSERT_LE(r.prompt_ids.size(), 150u);
    ASSERT_GE(r.max_tokens, 10u);
    ASSERT_LE(r.max_tokens, 30u);
    for (auto id : r.prompt_ids) ASSERT_TRUE(id >= 32 && id < 127);
    lengths.insert(r.prompt_ids.size());
  }
  EXPECT_GT(lengths.size(), 20u);
  EXPECT_EQ(RandomWorkload(o, 500)[17].prompt_ids, w[17].prompt_ids);
  o.range_ratio = 0;
  o.text = true;
  for (const auto& r : RandomWorkload(o, 10)) {
    EXPECT_EQ(r.prompt_text.size(), 100u);
    EXPECT_EQ(r.max_tokens, 20u);
  }
}

TEST(Workload, SharedPrefixGroupsShareExactlyTheirPrefix) {
  SharedPrefixOptions o;
  o.prefix_len = 40;
  o.prompts_per_prefix = 4;
  o.suffix_len = 8;
  const auto w = SharedPrefixWorkload(o, 12);
  for (std::size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(w[i].prompt_ids.size(), 48u);
    const auto& group_first = w[i - i % 4].prompt_ids;
    EXPECT_TRUE(std::equal(group_first.begin(), group_first.begin() + 40, w[i].prompt_ids.begin()));
  }
  EXPECT_NE(std::vector<std::uint32_t>(w[0].prompt_ids.begin(), w[0].prompt_ids.begin() + 40),
            std::vector<std::uint32_t>(w[4].prompt_ids.begin(), w[4].prompt_ids.begin() + 40));
  EXPECT_NE(w[0].prompt_ids, w[1].prompt_ids);  // distinct suffixes
}

// Interleaved: the same prompts (same groups, same seed), in a mixed order.
TEST(Workload, SharedPrefixInterleavedIsTheSamePromptsMixed) {
  SharedPrefixOptions o;
  o.prefix_len = 16;
  o.prompts_per_prefix = 5;
  o.suffix_len = 4;
  o.seed = 3;
  const auto grouped = SharedPrefixWorkload(o, 40);
  o.interleave = true;
  const auto mixed = SharedPrefixWorkload(o, 40);
  std::multiset<std::vector<std::uint32_t>> a, b;
  for (const auto& r : grouped) a.insert(r.prompt_ids);
  for (const auto& r : mixed) b.insert(r.prompt_ids);
  EXPECT_EQ(a, b);
  // Some neighbours now belong to different groups (grouped: only every 5th).
  int changes = 0;
  for (std::size_t i = 1; i < mixed.size(); ++i)
    changes += !std::equal(mixed[i].prompt_ids.begin(), mixed[i].prompt_ids.begin() + 16,
                           mixed[i - 1].prompt_ids.begin());
  EXPECT_GT(changes, 7);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/loadgen-test-" + std::to_string(getpid()) + "-" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(Workload, ShareGptLoadsUsableConversationsAndRejectsBadFiles) {
  const std::string good = WriteFile("good.json", R"([
    {"conversations": [{"from": "human", "value": "Hello there"}, {"from": "gpt", "value": "0123456789abcdef0123"}]},
    {"conversations": [{"from": "gpt", "value": "no question first"}]},
    {"conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "Q2"}, {"from": "gpt", "value": "A"}]},
    {"nothing": 1}, 17])");
  std::vector<BenchRequest> w;
  ASSERT_TRUE(LoadShareGpt(good, 10, 0, 0, &w).ok());
  ASSERT_EQ(w.size(), 2u);
  std::set<std::string> prompts;
  for (const auto& r : w) prompts.insert(r.prompt_text);
  EXPECT_EQ(prompts, (std::set<std::string>{"Hello there", "Q2"}));
  for (const auto& r : w) EXPECT_EQ(r.max_tokens, r.prompt_text == "Q2" ? 1u : 5u);
  ASSERT_TRUE(LoadShareGpt(good, 1, 7, 0, &w).ok());
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].max_tokens, 7u);

  Status s = LoadShareGpt("/nonexistent/sharegpt.json", 10, 0, 0, &w);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("/nonexistent/sharegpt.json"), std::string::npos);
  EXPECT_NE(
      LoadShareGpt(WriteFile("bad.json", "{not json"), 10, 0, 0, &w).message().find("is not JSON"),
      std::string::npos);
  EXPECT_NE(LoadShareGpt(WriteFile("obj.json", R"({"a": 1})"), 10, 0, 0, &w)
                .message()
                .find("expected a JSON array"),
            std::string::npos);
  EXPECT_NE(
      LoadShareGpt(WriteFile("empty.json", "[]"), 10, 0, 0, &w).message().find("no conversation"),
      std::string::npos);
  for (const char* f : {"good.json", "bad.json", "obj.json", "empty.json"})
    std::remove(("/tmp/loadgen-test-" + std::to_string(getpid()) + "-" + f).c_str());
}

TEST(Exposition, ParsesSumsAndEstimatesQuantilesLikePrometheus) {
  const std::string page = R"(# HELP x A histogram.
# TYPE x histogram
x_bucket{le="0.1",m="a"} 4
x_bucket{le="0.5",m="a"} 12
x_bucket{le="1.0",m="a"} 16
x_bucket{le="+Inf",m="a"} 16
x_bucket{le="0.1",m="b"} 6
x_bucket{le="0.5",m="b"} 18
x_bucket{le="1.0",m="b"} 24
x_bucket{le="+Inf",m="b"} 24
x_count{m="a"} 16
c_total{reason="stop",q="x\"y"} 3.0
c_total{reason="length"} 4
plain 1e3
)";
  std::vector<Sample> s;
  ASSERT_TRUE(ParseExposition(page, &s).ok());
  EXPECT_EQ(Sum(s, "c_total"), 7);
  EXPECT_EQ(Sum(s, "c_total", {{"reason", "stop"}}), 3);
  EXPECT_EQ(Sum(s, "c_total", {{"q", "x\"y"}}), 3);
  EXPECT_EQ(Sum(s, "plain"), 1000);
  const auto b = Buckets(s, "x");  // summed over m
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b.at(0.5), 30);
  EXPECT_EQ(b.rbegin()->second, 40);
  // Rank 20 of 40 in (0.1, 0.5] holding 10..30: 0.1 + 0.4 * (20 - 10) / 20.
  EXPECT_NEAR(HistogramQuantile(0.5, b), 0.3, 1e-12);
  EXPECT_NEAR(HistogramQuantile(0.1, b), 0.04, 1e-12);  // the first bucket starts at 0
  EXPECT_EQ(QuantileBucket(0.5, b), (std::pair<double, double>{0.1, 0.5}));
  const std::map<double, double> tail = {{1.0, 1}, {INFINITY, 10}};
  EXPECT_EQ(HistogramQuantile(0.99, tail), 1.0);  // in +Inf: the highest finite bound
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, {{1.0, 0}, {INFINITY, 0}})));
  const auto d = Delta(b, {{0.1, 10}, {INFINITY, 10}});
  EXPECT_EQ(d.at(0.1), 0);
  EXPECT_EQ(d.at(0.5), 30);
  EXPECT_EQ(d.at(INFINITY), 30);

  EXPECT_FALSE(ParseExposition("x{le=\"1\" 2\n", &s).ok());
  EXPECT_FALSE(ParseExposition("x 1 2 3 junk\nnovalue\n", &s).ok());
  EXPECT_FALSE(ParseExposition("x abc\n", &s).ok());
}

TEST(Runner, BaseUrlsAndRequestBodies) {
  Target t;
  ASSERT_TRUE(ParseBaseUrl("http://127.0.0.1:8123", &t).ok());
  EXPECT_EQ(t.host, "127.0.0.1");
  EXPECT_EQ(t.port, 8123);
  ASSERT_TRUE(ParseBaseUrl("http://[::1]:9/", &t).ok());
  EXPECT_EQ(t.host, "::1");
  ASSERT_TRUE(ParseBaseUrl("http://localhost", &t).ok());
  EXPECT_EQ(t.port, 80);
  for (const char* bad : {"https://x:1", "127.0.0.1:8000", "http://x:99999", "http://x/v1", ""})
    EXPECT_FALSE(ParseBaseUrl(bad, &t).ok()) << bad;

  RunOptions o;
  o.target.model = "m";
  o.ignore_eos = true;
  BenchRequest r;
  r.prompt_ids = {65, 66};
  r.max_tokens = 9;
  auto body = nlohmann::json::parse(RequestBody(o, r));
  EXPECT_EQ(body["prompt"], nlohmann::json({65, 66}));
  EXPECT_EQ(body["max_tokens"], 9);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["temperature"], 0);  // greedy unless --temperature
  o.temperature = 0.7;
  EXPECT_EQ(nlohmann::json::parse(RequestBody(o, r))["temperature"], 0.7);
  o.target.endpoint = "/v1/chat/completions";
  body = nlohmann::json::parse(RequestBody(o, r));
  EXPECT_EQ(body["messages"][0]["content"], "AB");
}

// A server's error is a plain response with a Content-Length, not a
// stream: the client must report its status and message (Boost 1.74 read
// an unset body limit as exceeded by any Content-Length).
TEST(Runner, AnErrorWithAContentLengthIsReportedAsTheServerSaidIt) {
  int port = 0;
  const int listener = sightline::testing::ListenLoopback(&port);
  ASSERT_GE(listener, 0);
  std::thread server([listener] {
    const int c = accept(listener, nullptr, nullptr);
    if (c < 0) return;
    // Read the whole request (headers, then Content-Length bytes) first, so
    // closing does not reset the connection under the client.
    std::string req;
    char buf[4096];
    std::size_t want = std::string::npos;
    while (req.size() < want) {
      const ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) break;
      req.append(buf, static_cast<std::size_t>(n));
      const std::size_t end = req.find("\r\n\r\n");
      const std::size_t cl = req.find("Content-Length: ");
      if (end != std::string::npos && cl != std::string::npos && cl < end)
        want = end + 4 + std::stoul(req.substr(cl + 16));
    }
    const std::string body = R"({"error":{"code":404,"message":"no such model"}})";
    const std::string res =
        "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body;
    if (write(c, res.data(), res.size()) < 0) {
      ADD_FAILURE() << "cannot answer the client";
    }
    close(c);
  });
  RunOptions o;
  o.target.port = port;
  o.target.model = "m";
  o.request_timeout_s = 10;
  BenchRequest r;
  r.prompt_ids = {65};
  r.max_tokens = 1;
  const RunOutput out = loadgen::Run(o, {r});  // not testing::Test::Run
  server.join();
  close(listener);
  ASSERT_EQ(out.results.size(), 1u);
  EXPECT_FALSE(out.results[0].ok);
  EXPECT_EQ(out.results[0].failure, "HTTP 404: no such model");
}

// Requests reuse the connections the server keeps, as vLLM's benchmark
// does; one the server closed while it sat idle costs the request nothing
// (it goes again on a new connection). A fake server answers each request
// with a one-token stream and closes its first connection after two.
TEST(Runner, RequestsReuseKeptConnectionsAndSurviveTheirClose) {
  for (const bool keep_alive : {true, false}) {
    int port = 0;
    const int listener = sightline::testing::ListenLoopback(&port);
    ASSERT_GE(listener, 0);
    constexpr int kRequests = 5;
    int accepted = 0;
    std::thread server([listener, &accepted] {
      const std::string events =
          "data: {\"choices\":[{\"index\":0,\"text\":\"A\",\"finish_reason\":null}]}\n\n"
          "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n"
          "data: [DONE]\n\n";
      char size[16];
      std::snprintf(size, sizeof size, "%zx", events.size());
      const std::string res =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
          "\r\n" +
          std::string(size) + "\r\n" + events + "\r\n0\r\n\r\n";
      for (int answered = 0; answered < kRequests;) {
        const int c = accept(listener, nullptr, nullptr);
        if (c < 0) return;
        ++accepted;
        std::string in;
        char buf[4096];
        for (int here = 0; answered < kRequests && (accepted > 1 || here < 2);) {
          const std::size_t end = in.find("\r\n\r\n");
          const std::size_t cl = in.find("Content-Length: ");
          if (end != std::string::npos && cl != std::string::npos && cl < end &&
              in.size() >= end + 4 + std::stoul(in.substr(cl + 16))) {
            in.erase(0, end + 4 + std::stoul(in.substr(cl + 16)));
            if (write(c, res.data(), res.size()) < 0) break;
            ++answered, ++here;
            continue;
          }
          const ssize_t n = read(c, buf, sizeof buf);
          if (n <= 0) break;  // the client closed it (or gave it up)
          in.append(buf, static_cast<std::size_t>(n));
        }
        close(c);
      }
    });
    RunOptions o;
    o.target.port = port;
    o.target.model = "m";
    o.request_timeout_s = 30;
    o.max_concurrency = 1;
    o.keep_alive = keep_alive;
    BenchRequest r;
    r.prompt_ids = {65};
    r.max_tokens = 1;
    const RunOutput out = loadgen::Run(o, std::vector<BenchRequest>(kRequests, r));
    server.join();
    close(listener);
    ASSERT_EQ(out.results.size(), static_cast<std::size_t>(kRequests));
    for (const RequestResult& result : out.results) {
      EXPECT_TRUE(result.ok) << result.failure;
      EXPECT_EQ(result.output_tokens, 1u);
    }
    // Kept: two requests on the first connection, three on the second.
    EXPECT_EQ(accepted, keep_alive ? 2 : kRequests) << keep_alive;
  }
}

TEST(Compare, CountsMatchOnlyWhenTheServerSawWhatTheClientSaw) {
  auto page = [](double ok, double prompt, double gen, double ttft, double itl) {
    std::vector<Sample> s;
    s.push_back({"vllm:request_success_total", {{"finished_reason", "length"}}, ok});
    s.push_back({"vllm:prompt_tokens_total", {}, prompt});
    s.push_back({"vllm:generation_tokens_total", {}, gen});
    s.push_back({"vllm:time_to_first_token_seconds_count", {}, ttft});
    s.push_back({"vllm:inter_token_latency_seconds_count", {}, itl});
    s.push_back({"vllm:request_time_per_output_token_seconds_count", {}, ttft});
    s.push_back({"vllm:e2e_request_latency_seconds_count", {}, ttft});
    s.push_back({"vllm:time_to_first_token_seconds_bucket", {{"le", "0.1"}}, ttft});
    s.push_back({"vllm:time_to_first_token_seconds_bucket", {{"le", "+Inf"}}, ttft});
    s.push_back({"http_requests_total",
                 {{"handler", "/v1/completions"}, {"method", "POST"}, {"status", "2xx"}},
                 ttft});
    return s;
  };
  std::vector<RequestResult> client(
      3, RequestResult{true, "", "length", 8, 4, 0.05, 0.2, {0.05, 0.05, 0.05}, 0.2});
  // Before: 10 earlier requests; after: those plus exactly the client's 3.
  const auto before = page(10, 80, 40, 10, 30);
  Comparison c = Compare(before, page(13, 104, 52, 13, 39), client, "/v1/completions");
  EXPECT_TRUE(c.counts_match) << FormatComparison(c);
  for (const auto& row : c.rows) EXPECT_FALSE(row.mismatch) << row.what;
  c = Compare(before, page(13, 104, 53, 13, 39), client,
              "/v1/completions");  // one generation token too many
  EXPECT_FALSE(c.counts_match);
  client[1].finish_reason = "stop";  // the server counted all three as length
  c = Compare(before, page(13, 104, 52, 13, 39), client, "/v1/completions");
  EXPECT_FALSE(c.counts_match);
  client[1].finish_reason = "length";
  EXPECT_NE(FormatComparison(c).find("MISMATCH"), std::string::npos);
  client[0].ttft = 0.5;  // outside the server's (0, 0.1] bucket for TTFT p99
  c = Compare(before, page(13, 104, 52, 13, 39), client, "/v1/completions");
  EXPECT_TRUE(c.counts_match);
  bool flagged = false;
  for (const auto& row : c.rows) flagged |= row.what == "TTFT p99 (s)" && row.mismatch;
  EXPECT_TRUE(flagged);
  // A request the server did not count in the HTTP family.
  auto short_page = page(13, 104, 52, 13, 39);
  short_page.back().value = 12;
  EXPECT_FALSE(Compare(before, short_page, client, "/v1/completions").counts_match);
}

// Two 1,200-token requests: the client waited 0.30 s for each first chunk
// and 0.10 s from it to the last token; the engine queued each 0.02 s.
TEST(Compare, IntervalsHoldOnlyWhenTheServerTimedWhatTheClientSaw) {
  std::vector<RequestResult> client(
      2, RequestResult{true, "", "length", 1200, 3, 0.30, 0.41, {0.05, 0.05}, 0.40});
  struct Server {
    double queue, prefill, decode, itl, ttft, e2e;
  };
  auto page = [](const Server& s) {
    std::vector<Sample> p;
    p.push_back({"vllm:request_queue_time_seconds_sum", {}, s.queue});
    p.push_back({"vllm:request_prefill_time_seconds_sum", {}, s.prefill});
    p.push_back({"vllm:request_decode_time_seconds_sum", {}, s.decode});
    p.push_back({"vllm:inter_token_latency_seconds_sum", {}, s.itl});
    p.push_back({"vllm:time_to_first_token_seconds_sum", {}, s.ttft});
    p.push_back({"vllm:e2e_request_latency_seconds_sum", {}, s.e2e});
    return p;
  };
  auto judge = [&](const Server& s) {
    Comparison c = Compare({}, page(s), client, "/v1/completions");
    std::string failed;
    for (const IntervalRow& r : c.intervals) {
      EXPECT_TRUE(r.judged) << r.what;
      if (!r.pass) failed += r.what + "; ";
    }
    EXPECT_EQ(c.intervals_hold, failed.empty());
    return failed;
  };
  // Right: prefill 0.25 of each 0.30, decode 0.098 of each 0.10.
  EXPECT_EQ(judge({0.04, 0.50, 0.196, 0.196, 0.58, 0.80}), "");
  // Outputs stamped with their step's start: prefill ~0, counted as decode.
  EXPECT_EQ(judge({0.04, 0.0002, 0.696, 0.696, 0.58, 0.80}),
            "ITL sum ~ client first to last token; prefill >= 0.3 x (client TTFT - queue); ");
  // The server's decode 0.075 s longer per request than the client's: gaps
  // after a first token the client could not see, which its TTFT (0.075 s
  // beyond the server's) covers; without that, they are not covered.
  EXPECT_EQ(judge({0.04, 0.40, 0.35, 0.35, 0.45, 0.80}), "");
  EXPECT_EQ(judge({0.04, 0.40, 0.35, 0.35, 0.58, 0.80}), "ITL sum ~ client first to last token; ");
  // Engine intervals longer than the client's wait.
  EXPECT_EQ(judge({0.20, 0.50, 0.196, 0.196, 0.64, 0.80}),
            "queue + prefill <= client TTFT; server TTFT <= client TTFT; ");
  EXPECT_EQ(judge({0.04, 0.50, 0.196, 0.180, 0.58, 0.90}),
            "server e2e <= client e2e; ITL sum = decode time; ");
  // Short prompts: the prefill share is not judged; a failed request: nothing is.
  client[0].prompt_tokens = 24;
  Comparison c =
      Compare({}, page({0.04, 0.0002, 0.196, 0.196, 0.58, 0.80}), client, "/v1/completions");
  EXPECT_TRUE(c.intervals_hold) << FormatComparison(c);
  EXPECT_FALSE(c.intervals.back().judged);
  client[1].ok = false;
  c = Compare({}, page({1, 1, 1, 0, 9, 9}), client, "/v1/completions");
  EXPECT_TRUE(c.intervals_hold);
  for (const IntervalRow& r : c.intervals) EXPECT_FALSE(r.judged) << r.what;
  EXPECT_NE(FormatComparison(c).find("Intervals: every judged relation holds."), std::string::npos);
}

}  // namespace
}  // namespace sightline::loadgen
