// --per-request-spec-decode-metrics end to end: a real engine that
// speculates (n-gram, K = 3) and a real API server. Each response's
// metrics.speculative_decoding object is consistent in itself (vLLM's
// invariants), its arrays only under `detailed`, and over a run the objects
// sum to the engine's vllm:spec_decode_* counters, per position included.
// Also the flag's refusals, and the object's JSON from known steps.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "api_server/live_api_server.h"
#include "metrics/spec_decode_request_metrics.h"

namespace sightline::api {
namespace {

constexpr int kSpecK = 3;
const char* const kNgram =
    R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1,)"
    R"( "prompt_lookup_max": 3})";

TEST(RequestSpecDecodeMetrics, ShowsVllmsFieldsFromTheStepsObserved) {
  RequestSpecDecodeMetrics none(kSpecK, /*detailed=*/true);
  EXPECT_EQ(none.ToJson(), json::parse(R"({"mean_acceptance_length": 1.0,
      "draft_acceptance_rate": 0.0, "acceptance_histogram": [0, 0, 0, 0], "num_spec_steps": 0,
      "num_accepted_draft_tokens": 0, "num_draft_tokens": 0, "num_spec_tokens": 3})"));

  RequestSpecDecodeMetrics detailed(kSpecK, /*detailed=*/true);
  RequestSpecDecodeMetrics summary(kSpecK, /*detailed=*/false);
  for (auto [drafted, accepted] : {std::pair{3u, 3u}, {3u, 0u}, {2u, 1u}, {3u, 1u}}) {
    detailed.Observe(drafted, accepted);
    summary.Observe(drafted, accepted);
  }
  json d = detailed.ToJson();
  EXPECT_DOUBLE_EQ(d["mean_acceptance_length"].get<double>(), 1.0 + 5.0 / 4);
  EXPECT_DOUBLE_EQ(d["draft_acceptance_rate"].get<double>(), 5.0 / 11);
  EXPECT_EQ(d["acceptance_histogram"], json::parse("[1, 2, 0, 1]"));
  EXPECT_EQ(d["num_spec_steps"], 4);
  EXPECT_EQ(d["num_accepted_draft_tokens"], 5);
  EXPECT_EQ(d["num_draft_tokens"], 11);
  EXPECT_EQ(d["num_spec_tokens"], 3);
  EXPECT_EQ(d["per_step_accepted"], json::parse("[3, 0, 1, 1]"));
  EXPECT_EQ(d["per_step_drafted"], json::parse("[3, 3, 2, 3]"));
  json s = summary.ToJson();
  EXPECT_FALSE(s.contains("per_step_accepted"));
  d.erase("per_step_accepted");
  d.erase("per_step_drafted");
  EXPECT_EQ(s, d);

  SpecDecodeMetricsMode mode;
  EXPECT_TRUE(ParseSpecDecodeMetricsMode("detailed", &mode).ok());
  EXPECT_EQ(mode, SpecDecodeMetricsMode::kDetailed);
  const Status bad = ParseSpecDecodeMetricsMode("verbose", &mode);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--per-request-spec-decode-metrics"), std::string::npos);
}

// vLLM's own checks of one object (tests/v1 per-request spec-decode
// metrics), plus what K bounds.
void ExpectConsistent(const json& m, bool detailed) {
  SCOPED_TRACE(m.dump());
  const auto& histogram = m.at("acceptance_histogram");
  ASSERT_EQ(histogram.size(), kSpecK + 1u);
  std::uint64_t steps = 0, accepted = 0;
  for (std::size_t j = 0; j < histogram.size(); ++j) {
    steps += histogram[j].get<std::uint64_t>();
    accepted += j * histogram[j].get<std::uint64_t>();
  }
  EXPECT_EQ(m.at("num_spec_steps"), steps);
  EXPECT_EQ(m.at("num_accepted_draft_tokens"), accepted);
  EXPECT_EQ(m.at("num_spec_tokens"), kSpecK);
  const auto drafted = m.at("num_draft_tokens").get<std::uint64_t>();
  EXPECT_LE(accepted, drafted);
  EXPECT_LE(drafted, steps * kSpecK);
  EXPECT_DOUBLE_EQ(m.at("mean_acceptance_length").get<double>(),
                   steps ? 1.0 + static_cast<double>(accepted) / steps : 1.0);
  EXPECT_DOUBLE_EQ(m.at("draft_acceptance_rate").get<double>(),
                   drafted ? static_cast<double>(accepted) / drafted : 0.0);
  EXPECT_EQ(m.contains("per_step_accepted"), detailed && steps > 0);
  if (!m.contains("per_step_accepted")) return;
  const auto& per_accepted = m.at("per_step_accepted");
  const auto& per_drafted = m.at("per_step_drafted");
  ASSERT_EQ(per_accepted.size(), steps);
  ASSERT_EQ(per_drafted.size(), steps);
  std::uint64_t sum_accepted = 0, sum_drafted = 0;
  for (std::size_t i = 0; i < steps; ++i) {
    EXPECT_LE(per_accepted[i].get<int>(), per_drafted[i].get<int>());
    EXPECT_GE(per_drafted[i].get<int>(), 1);
    EXPECT_LE(per_drafted[i].get<int>(), kSpecK);
    sum_accepted += per_accepted[i].get<std::uint64_t>();
    sum_drafted += per_drafted[i].get<std::uint64_t>();
  }
  EXPECT_EQ(sum_accepted, accepted);
  EXPECT_EQ(sum_drafted, drafted);
}

class SpecDecodeRequestMetricsTest : public CompletionsTest {
 protected:
  void Start(const char* mode) {
    extra_engine_args_ = {"--speculative-config", kNgram};
    extra_api_args_ = {"--enable-per-request-metrics", "--per-request-spec-decode-metrics", mode};
    CompletionsTest::SetUp();
  }
  void SetUp() override {}  // each test starts with its mode

  // The object of a non-streamed body, or of a stream's last chunk before
  // [DONE] (the usage chunk); no other chunk has metrics.
  json Object(const std::string& route, json body) {
    body["model"] = "tiny";
    const auto r = HttpClient(port_).Post(route, body.dump());
    EXPECT_EQ(r.result_int(), 200) << r.body();
    if (!body.value("stream", false))
      return json::parse(r.body())["metrics"]["speculative_decoding"];
    const auto events = SseEvents(r.body());
    EXPECT_GE(events.size(), 2u);
    EXPECT_EQ(events.back(), "[DONE]");
    for (std::size_t i = 0; i + 2 < events.size(); ++i)
      EXPECT_EQ(events[i].find("\"metrics\""), std::string::npos) << events[i];
    const json last = json::parse(events.at(events.size() - 2));
    EXPECT_TRUE(last.contains("usage")) << last.dump();
    return last["metrics"]["speculative_decoding"];
  }
};

// A prompt that repeats a span, so the proposer finds matches; greedy (the
// random tiny model falls into loops the proposer then drafts) and sampled.
json Body(double temperature, bool stream) {
  json b = {{"prompt", "abc abd abc abd abc abd abc"},
            {"max_tokens", 40},
            {"temperature", temperature},
            {"seed", 7},
            {"ignore_eos", true}};
  if (stream) {
    b["stream"] = true;
    b["stream_options"] = {{"include_usage", true}};
  }
  return b;
}

TEST_F(SpecDecodeRequestMetricsTest, EachObjectAddsUpAndAllSumToTheEngineCounters) {
  Start("detailed");
  std::uint64_t steps = 0, drafted = 0, accepted = 0;
  std::vector<std::uint64_t> per_position(kSpecK, 0);
  auto add = [&](const json& m) {
    ExpectConsistent(m, /*detailed=*/true);
    steps += m["num_spec_steps"].get<std::uint64_t>();
    drafted += m["num_draft_tokens"].get<std::uint64_t>();
    accepted += m["num_accepted_draft_tokens"].get<std::uint64_t>();
    if (m.contains("per_step_accepted"))
      for (const auto& a : m["per_step_accepted"])
        for (int p = 0; p < a.get<int>(); ++p) ++per_position[p];
  };
  for (double temperature : {0.0, 0.8})
    for (bool stream : {false, true}) {
      SCOPED_TRACE("temperature " + std::to_string(temperature) + (stream ? " stream" : ""));
      add(Object("/v1/completions", Body(temperature, stream)));
      json chat = Body(temperature, stream);
      chat["messages"] = {{{"role", "user"}, {"content", chat["prompt"]}}};
      chat.erase("prompt");
      add(Object("/v1/chat/completions", chat));
    }
  ASSERT_GT(steps, 0u) << "nothing was drafted: the test shows nothing";
  ASSERT_GT(accepted, 0u);
  auto p = Page();
  auto counter = [&](const std::string& name, const std::string& extra = "") {
    return p["vllm:spec_decode_" + name + "_total{engine=\"0\",model_name=\"tiny\"" + extra + "}"];
  };
  EXPECT_EQ(counter("num_drafts"), steps);
  EXPECT_EQ(counter("num_draft_tokens"), drafted);
  EXPECT_EQ(counter("num_accepted_tokens"), accepted);
  for (int i = 0; i < kSpecK; ++i)
    EXPECT_EQ(counter("num_accepted_tokens_per_pos", ",position=\"" + std::to_string(i) + "\""),
              per_position[i])
        << "position " << i;
}

TEST_F(SpecDecodeRequestMetricsTest, SummaryHasNoArraysAndSeveralChoicesNoObject) {
  Start("summary");
  const json m = Object("/v1/completions", Body(0, false));
  ExpectConsistent(m, /*detailed=*/false);
  EXPECT_GT(m["num_spec_steps"].get<int>(), 0);
  ExpectConsistent(Object("/v1/completions", Body(0.8, true)), /*detailed=*/false);
  json several = Body(0, false);
  several["n"] = 2;
  EXPECT_TRUE(Complete(several)["metrics"].is_null());
}

// One line naming the flag, exit 1: without the per-request metrics it
// belongs to, with a value it does not know, and next to an engine that does
// not speculate (known only once the engine answered).
TEST(SpecDecodeRequestMetricsCli, RefusesWhatCannotBeShown) {
  auto run = [](const std::string& args) {
    FILE* p =
        popen((std::string("timeout 60 ") + SIGHTLINE_CLI + " " + args + " 2>&1").c_str(), "r");
    std::string out;
    char buf[512];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int rc = WEXITSTATUS(pclose(p));
    return std::pair{rc, out};
  };
  const std::string api = "api-server --engine-input ipc:///tmp/x --engine-output ipc:///tmp/y ";
  auto [rc, out] = run(api + "--per-request-spec-decode-metrics summary --dry-run");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("needs --enable-per-request-metrics"), std::string::npos) << out;
  std::tie(rc, out) = run(api +
                          "--enable-per-request-metrics --per-request-spec-decode-metrics "
                          "verbose --dry-run");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("none, summary or detailed"), std::string::npos) << out;

  std::unique_ptr<metrics::Registry> reg;
  ASSERT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                        "supervisor", &reg)
                  .ok());
  const std::string base = "/tmp/" + reg->instance();
  const std::string in = "ipc://" + base + ".in", out_addr = "ipc://" + base + ".out";
  ChildProcess engine =
      ChildProcess::Exec({SIGHTLINE_CLI, "engine", "--input", in, "--output", out_addr, "--threads",
                          "1", "--registry", reg->instance()});
  std::tie(rc, out) = run("api-server --engine-input " + in + " --engine-output " + out_addr +
                          " --registry " + reg->instance() +
                          " --port 0 --enable-per-request-metrics "
                          "--per-request-spec-decode-metrics detailed");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out.find("needs an engine that speculates"), std::string::npos) << out;
  engine.KillAndWait(SIGTERM);
  std::filesystem::remove(base + ".in");
  std::filesystem::remove(base + ".out");
}

}  // namespace
}  // namespace sightline::api
