// `sightline serve --data-parallel-size N`: N engines behind every API
// server. Each request runs on one engine (the balancer's, or the one that
// X-data-parallel-rank names), the instance's counts stay exact across
// engines and API servers with every engine-scoped series labelled by its
// engine, greedy output does not depend on the engine, and bad ranks and
// sizes are refused without losing or running anything.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/bench_run.h"
#include "e2e/load.h"
#include "e2e/serve_instance.h"
#include "support/http_client.h"

namespace sightline::testing {
namespace {

// Names here are Dp-prefixed: the e2e files compile as one unity batch.
const std::string kDpSuccess = "vllm:request_success_total";
constexpr auto kDpCeiling = std::chrono::seconds(60);

// The value of label `label` in a sample key `name{a="x",...}`, or nullopt.
std::optional<std::string> DpLabel(const std::string& key, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(key, m, std::regex("[{,]" + label + "=\"([^\"]*)\""))) return std::nullopt;
  return m[1].str();
}

bool DpIsFamily(const std::string& key, const std::string& family) {
  return key == family || key.rfind(family + "{", 0) == 0;
}

// The sum of `family`'s samples of engine `engine` (of every engine if empty).
double DpSum(const std::map<std::string, double>& page, const std::string& family,
             const std::string& engine = "") {
  double total = 0;
  for (const auto& [key, value] : page)
    if (DpIsFamily(key, family) && (engine.empty() || DpLabel(key, "engine") == engine))
      total += value;
  return total;
}

// How many series of `family` each engine label has ("" for none).
std::map<std::string, int> DpSeriesPerEngine(const std::map<std::string, double>& page,
                                             const std::string& family) {
  std::map<std::string, int> out;
  for (const auto& [key, value] : page)
    if (DpIsFamily(key, family)) ++out[DpLabel(key, "engine").value_or("")];
  return out;
}

// j at `pointer` (e.g. "/choices/0/text"), or null if absent.
nlohmann::json DpAt(const nlohmann::json& j, const std::string& pointer) {
  const nlohmann::json::json_pointer p(pointer);
  return j.contains(p) ? j.at(p) : nlohmann::json();
}

struct DpReply {
  int status = 0;
  nlohmann::json body;  // null if not JSON
  std::string raw;
};

// POSTs `body` to `path`, with X-data-parallel-rank: `rank` when given.
DpReply DpPost(int port, const std::string& path, const nlohmann::json& body,
               const std::optional<std::string>& rank = std::nullopt) {
  std::map<std::string, std::string> fields = {{"Content-Type", "application/json"}};
  if (rank) fields["X-data-parallel-rank"] = *rank;
  const auto r = HttpClient(port).Request("POST", path, fields, body.dump());
  return {r.result_int(), nlohmann::json::parse(r.body(), nullptr, false), r.body()};
}

nlohmann::json DpGreedyBody() {
  return {{"prompt", "The quick brown fox jumps over"},
          {"max_tokens", 16},
          {"temperature", 0},
          {"ignore_eos", true},
          {"logprobs", 1}};
}

TEST(DataParallel, CountsAreExactAcrossEnginesAndApiServers) {
  ServeInstance serve({"--data-parallel-size", "2", "--api-server-count", "3"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  EXPECT_EQ(serve.Children().size(), 5u);  // two engines, three API servers
  EXPECT_GT(serve.Child("--engine-index 0"), 0) << serve.Log();
  EXPECT_GT(serve.Child("--engine-index 1"), 0) << serve.Log();

  // Every engine's series exist from start-up, at 0.
  const auto start = Scrape(serve.port());
  for (const std::string engine : {"0", "1"}) {
    EXPECT_EQ(DpSeriesPerEngine(start, "vllm:num_requests_running")[engine], 1) << engine;
    EXPECT_EQ(DpSeriesPerEngine(start, "vllm:num_requests_waiting")[engine], 1) << engine;
    EXPECT_GT(DpSeriesPerEngine(start, kDpSuccess)[engine], 0) << engine;
    EXPECT_EQ(DpSum(start, kDpSuccess, engine), 0) << engine;
  }

  constexpr int kN = 40;
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.port());
  const BenchRun r =
      Bench({"--base-url", url, "--num-prompts", std::to_string(kN), "--max-concurrency", "8",
             "--random-input-len", "24", "--random-output-len", "16", "--random-range-ratio", "0.5",
             "--ignore-eos", "--compare-metrics"});
  ExpectExactCounts(r, kN);
  ASSERT_TRUE(r.json.is_object());
  const double input = r.json["total_input_tokens"].get<double>();
  const double output = r.json["total_output_tokens"].get<double>();
  EXPECT_GE(input, kN * 12);
  EXPECT_GE(output, kN * 8);

  std::map<std::string, double> page;
  ASSERT_TRUE(WaitForPage(
      serve.port(),
      [&](auto p) {
        page = p;
        return DpSum(p, kDpSuccess) >= kN;
      },
      kDpCeiling))
      << DpSum(page, kDpSuccess);
  // Whichever API server answers, the page is the whole instance's.
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE("scrape " + std::to_string(i));
    if (i > 0) page = Scrape(serve.port());
    const double on0 = DpSum(page, kDpSuccess, "0"), on1 = DpSum(page, kDpSuccess, "1");
    EXPECT_EQ(on0 + on1, kN);
    EXPECT_EQ(DpSum(page, kDpSuccess), kN);  // no series without an engine label
    EXPECT_GT(on0, 0);  // concurrency 8 keeps both engines' scores up: both get work
    EXPECT_GT(on1, 0);
    for (const std::string family : {"vllm:prompt_tokens_total", "vllm:generation_tokens_total"}) {
      const double want = family == "vllm:prompt_tokens_total" ? input : output;
      EXPECT_EQ(DpSum(page, family, "0") + DpSum(page, family, "1"), want) << family;
      EXPECT_EQ(DpSum(page, family), want) << family;
    }
    EXPECT_EQ(DpSum(page, "vllm:e2e_request_latency_seconds_count", "0") +
                  DpSum(page, "vllm:e2e_request_latency_seconds_count", "1"),
              kN);
    EXPECT_EQ(DpSum(page, "vllm:time_to_first_token_seconds_count", "0"), on0);
    EXPECT_EQ(DpSum(page, "vllm:time_to_first_token_seconds_count", "1"), on1);
    const auto info = DpSeriesPerEngine(page, "vllm:cache_config_info");
    EXPECT_EQ(info, (std::map<std::string, int>{{"0", 1}, {"1", 1}}));
    EXPECT_EQ(DpSum(page, "vllm:num_requests_running"), 0);
  }
}

TEST(DataParallel, GreedyOutputIsTheSameOnEveryEngine) {
  ServeInstance serve({"--data-parallel-size", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const auto before = Scrape(serve.port());
  ASSERT_GT(DpSeriesPerEngine(before, kDpSuccess)["1"], 0) << "no engine=\"1\" series at start-up";
  const double b0 = DpSum(before, kDpSuccess, "0"), b1 = DpSum(before, kDpSuccess, "1");

  const DpReply on0 = DpPost(serve.port(), "/v1/completions", DpGreedyBody(), "0");
  const DpReply on1 = DpPost(serve.port(), "/v1/completions", DpGreedyBody(), "1");
  ASSERT_EQ(on0.status, 200) << on0.raw;
  ASSERT_EQ(on1.status, 200) << on1.raw;
  EXPECT_EQ(DpAt(on0.body, "/choices/0/finish_reason"), "length") << on0.raw;
  EXPECT_TRUE(DpAt(on0.body, "/choices/0/text").is_string()) << on0.raw;
  for (const char* field : {"/choices/0/text", "/choices/0/logprobs/tokens", "/usage"})
    EXPECT_EQ(DpAt(on0.body, field), DpAt(on1.body, field)) << field << "\n"
                                                            << on0.raw << "\n"
                                                            << on1.raw;

  std::map<std::string, double> page;
  EXPECT_TRUE(WaitForPage(
      serve.port(),
      [&](auto p) {
        page = p;
        return DpSum(p, kDpSuccess, "0") >= b0 + 1 && DpSum(p, kDpSuccess, "1") >= b1 + 1;
      },
      kDpCeiling));
  EXPECT_EQ(DpSum(page, kDpSuccess, "0"), b0 + 1);
  EXPECT_EQ(DpSum(page, kDpSuccess, "1"), b1 + 1);
}

TEST(DataParallel, ABadRankHeaderIsRefusedAndLosesNothing) {
  ServeInstance serve({"-dp", "2"});  // the short form
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const auto before = Scrape(serve.port());
  const double success = DpSum(before, kDpSuccess);
  const double prompt = DpSum(before, "vllm:prompt_tokens_total");

  const nlohmann::json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                               {"max_tokens", 4}};
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"/v1/completions", "x"},     {"/v1/completions", "-1"},
      {"/v1/completions", "2"},     {"/v1/completions", "1.5"},
      {"/v1/completions", ""},      {"/v1/completions", "99999999999999999999"},
      {"/v1/chat/completions", "2"}};
  for (const auto& [path, rank] : bad) {
    SCOPED_TRACE(path + " X-data-parallel-rank: \"" + rank + "\"");
    const DpReply r =
        DpPost(serve.port(), path, path == "/v1/completions" ? DpGreedyBody() : chat, rank);
    EXPECT_EQ(r.status, 400) << r.raw;
    EXPECT_EQ(DpAt(r.body, "/error/type"), "BadRequestError") << r.raw;
    const nlohmann::json message = DpAt(r.body, "/error/message");
    EXPECT_TRUE(message.is_string() && !message.get<std::string>().empty()) << r.raw;
  }

  const DpReply ok = DpPost(serve.port(), "/v1/completions", DpGreedyBody());
  EXPECT_EQ(ok.status, 200) << ok.raw;
  std::map<std::string, double> page;
  EXPECT_TRUE(WaitForPage(
      serve.port(),
      [&](auto p) {
        page = p;
        return DpSum(p, kDpSuccess) >= success + 1;
      },
      kDpCeiling));
  EXPECT_EQ(DpSum(page, kDpSuccess), success + 1);  // the refused ones ran nowhere
  EXPECT_EQ(DpSum(page, "vllm:prompt_tokens_total") - prompt,
            DpAt(ok.body, "/usage/prompt_tokens"));
  EXPECT_EQ(DpSum(page, "vllm:num_requests_running"), 0);
  EXPECT_EQ(DpSum(page, "vllm:num_requests_waiting"), 0);
}

TEST(DataParallel, SizeIsValidated) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"--data-parallel-size", "0"},
                                             {"--data-parallel-size", "65"},
                                             {"--data-parallel-size", "two"},
                                             {"-dp", "0"}}) {
    SCOPED_TRACE(args[0] + " " + args[1]);
    ServeInstance serve(args);
    const auto code = serve.WaitExit(30);
    ASSERT_TRUE(code.has_value()) << "did not fail";
    EXPECT_NE(*code, 0);
    const std::string log = serve.Log();
    EXPECT_EQ(log.rfind("sightline: error: ", 0), 0u) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    EXPECT_NE(log.find("--data-parallel-size"), std::string::npos) << log;
    EXPECT_FALSE(SegmentExists(serve.registry()));
  }
}

// The sample of `name` for engine `engine` of the built-in model.
std::string DpKey(const std::string& name, const std::string& engine,
                  const std::string& extra = "") {
  return name + "{engine=\"" + engine + "\"," + extra + "model_name=\"sightline-tiny\"}";
}

// kill -9 of one engine under load: the other's streams complete, the
// victim's end with an error event and are counted as aborted on its engine,
// `serve` restarts it with the same index and it serves again; no counter
// ever goes down, and the dead process's live gauges are gone.
TEST(DataParallel, AKilledEngineIsRestartedWhileTheOthersServeOn) {
  ServeInstance serve({"--data-parallel-size", "2", "--api-server-count", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const pid_t victim = serve.Child("--engine-index 1");
  ASSERT_GT(victim, 0);
  Scraper scraper(serve.port());
  constexpr int kStreams = 24;
  std::vector<std::future<Outcome>> streams;
  for (int i = 0; i < kStreams; ++i)
    streams.push_back(
        std::async(std::launch::async, [&] { return Complete(serve.port(), 8, 2000, true); }));
  // Both engines busy: each holds some of the streams.
  ASSERT_TRUE(WaitForPage(
      serve.port(),
      [](auto p) {
        return p[DpKey("vllm:num_requests_running", "0")] > 0 &&
               p[DpKey("vllm:num_requests_running", "1")] > 0;
      },
      kDpCeiling));
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  int completed = 0, failed = 0;
  for (auto& s : streams) {
    ASSERT_EQ(s.wait_for(kDpCeiling), std::future_status::ready) << "a stream hung";
    const Outcome o = s.get();
    if (o.ok) {
      ++completed;
    } else {
      ++failed;
      EXPECT_TRUE(o.error_event) << o.failure;  // told it failed, after its headers
    }
  }
  EXPECT_GT(completed, 0);
  EXPECT_GT(failed, 0);
  // Restarted with its index, serving again, counted once.
  std::map<std::string, double> page;
  ASSERT_TRUE(WaitForPage(
      serve.port(),
      [&](auto p) {
        page = p;
        return p["sightline:engine_restarts_total{engine=\"1\"}"] == 1;
      },
      kDpCeiling))
      << serve.Log();
  // Restarted is not yet ready: rank 1 answers 503 (counted nowhere) until
  // every API server has its EngineReady.
  const pid_t successor = serve.Child("--engine-index 1");
  EXPECT_GT(successor, 0);
  EXPECT_NE(successor, victim);
  DpReply again;
  for (int i = 0; i < 600 && again.status != 200; ++i) {
    again = DpPost(serve.port(), "/v1/completions", DpGreedyBody(), "1");
    if (again.status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(again.status, 200) << again.raw;
  const std::string serving = "engine 1 (pid " + std::to_string(successor) + ") is serving again";
  for (int i = 0; i < 600 && serve.Log().find(serving) == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_NE(serve.Log().find(serving), std::string::npos) << serve.Log();
  // Every stream counted once: the victim's as aborts on engine 1, the
  // others' as length on whichever engine served them; the restart request too.
  ASSERT_TRUE(WaitForPage(
      serve.port(),
      [&](auto p) {
        page = p;
        return DpSum(p, kDpSuccess) == kStreams + 1;
      },
      kDpCeiling));
  EXPECT_EQ(page[DpKey(kDpSuccess, "1", "finished_reason=\"abort\",")], failed);
  EXPECT_EQ(page[DpKey(kDpSuccess, "0", "finished_reason=\"abort\",")], 0);
  EXPECT_EQ(page[DpKey(kDpSuccess, "0", "finished_reason=\"length\",")] +
                page[DpKey(kDpSuccess, "1", "finished_reason=\"length\",")],
            completed + 1);
  EXPECT_EQ(page["sightline:engine_restarts_total{engine=\"0\"}"], 0);
  // The dead engine's running requests left with it (its gauges were marked dead).
  EXPECT_TRUE(WaitForPage(
      serve.port(), [](auto p) { return DpSum(p, "vllm:num_requests_running") == 0; }, kDpCeiling));
  scraper.Stop();
  EXPECT_GT(scraper.scrapes(), 0);
  EXPECT_TRUE(scraper.problems().empty()) << scraper.problems().front();
}

// A frozen engine (SIGSTOP) goes quiet: /health stays 200 while another
// serves, the strict form names it, requests go to the healthy one; once it
// resumes, both are healthy again.
TEST(DataParallel, StrictHealthNamesAFrozenEngineAndRequestsAvoidIt) {
  ServeInstance serve({"--data-parallel-size", "2", "--engine-health-timeout", "3"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const pid_t frozen = serve.Child("--engine-index 1");
  ASSERT_GT(frozen, 0);
  auto status = [&](const std::string& target) {
    return HttpClient(serve.port()).Request("GET", target).result_int();
  };
  EXPECT_EQ(status("/health?strict=1"), 200);
  ASSERT_EQ(kill(frozen, SIGSTOP), 0);
  struct Resume {  // whatever fails below, the engine does not stay stopped
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{frozen};
  bool strict_503 = false;
  for (int i = 0; i < 600 && !strict_503; ++i) {
    strict_503 = status("/health?strict=1") == 503;
    if (!strict_503) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(strict_503);
  const auto strict = HttpClient(serve.port()).Request("GET", "/health?strict=true");
  EXPECT_NE(strict.body().find("engine 1 not running"), std::string::npos) << strict.body();
  EXPECT_EQ(status("/health"), 200);  // engine 0 serves
  for (int i = 0; i < 4; ++i) {
    const DpReply r = DpPost(serve.port(), "/v1/completions", DpGreedyBody());
    EXPECT_EQ(r.status, 200) << r.raw;
  }
  const auto page = Scrape(serve.port());
  EXPECT_EQ(DpSum(page, kDpSuccess, "0"), 4);
  ASSERT_EQ(kill(frozen, SIGCONT), 0);
  bool healthy = false;
  for (int i = 0; i < 600 && !healthy; ++i) {
    healthy = status("/health?strict=1") == 200;
    if (!healthy) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(healthy);
}

// Deaths of one engine beyond --engine-max-restarts within a minute stop
// the instance (exit 1), as an API server's do.
TEST(DataParallel, AnEngineDyingTooOftenStopsTheInstance) {
  ServeInstance serve({"--data-parallel-size", "2", "--engine-max-restarts", "1"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const std::vector<pid_t> children = serve.Children();
  const pid_t first = serve.Child("--engine-index 1");
  ASSERT_GT(first, 0);
  ASSERT_EQ(kill(first, SIGKILL), 0);
  pid_t second = -1;
  for (int i = 0; i < 600 && (second <= 0 || second == first); ++i) {
    second = serve.Child("--engine-index 1");
    if (second <= 0 || second == first) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(second, 0);
  ASSERT_NE(second, first);
  ASSERT_EQ(kill(second, SIGKILL), 0);
  const auto code = serve.WaitExit(60);
  ASSERT_TRUE(code.has_value()) << serve.Log();
  EXPECT_EQ(*code, 1);
  EXPECT_NE(serve.Log().find("engine 1 died"), std::string::npos) << serve.Log();
  EXPECT_NE(serve.Log().find("giving up"), std::string::npos) << serve.Log();
  EXPECT_TRUE(AllGone(children, 10)) << "orphans left";
}

// Prefix affinity end to end: the API server hashes a prompt as the engines
// do and sends it to the engine whose prefix cache holds its leading blocks.
TEST(DataParallel, APromptGoesToTheEngineThatCachesItsPrefix) {
  ServeInstance serve({"--data-parallel-size", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const std::string system(320, 's');  // 20 blocks of 16 with the byte tokenizer
  auto body = [&](const std::string& user) {
    return nlohmann::json{{"prompt", system + user}, {"max_tokens", 2}, {"temperature", 0}};
  };
  // Pinned to engine 1 twice: the second answer comes after the engine's
  // CacheUpdate for the first (one API server, one ordered stream).
  for (const char* user : {" one", " two"}) {
    const DpReply r = DpPost(serve.port(), "/v1/completions", body(user), "1");
    ASSERT_EQ(r.status, 200) << r.raw;
  }
  // Four more, unpinned (within the affinity bound even if no load report
  // comes between them): all on engine 1, which finds their prefix cached.
  for (const char* user : {" three", " four", " five", " six"}) {
    const DpReply r = DpPost(serve.port(), "/v1/completions", body(user));
    ASSERT_EQ(r.status, 200) << r.raw;
  }
  auto page = Scrape(serve.port());
  EXPECT_EQ(DpSum(page, kDpSuccess, "1"), 6);
  EXPECT_EQ(DpSum(page, kDpSuccess, "0"), 0);
  EXPECT_GE(page[DpKey("vllm:prefix_cache_hits_total", "1")], 5 * 320);
  EXPECT_EQ(page[DpKey("vllm:prefix_cache_hits_total", "0")], 0);
}

// The first of `count` consecutive free loopback ports (probed; another
// process could still take one before the server binds it).
int DpFreePorts(int count) {
  std::mt19937 rng(static_cast<unsigned>(getpid()));
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int base = 10000 + static_cast<int>(rng() % 20000);  // below the ephemeral range
    std::vector<int> fds;
    bool free = true;
    for (int i = 0; i < count && free; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<std::uint16_t>(base + i));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      free = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      fds.push_back(fd);
    }
    for (int fd : fds) close(fd);
    if (free) return base;
  }
  return 0;
}

// What the llm-d endpoint picker reads of a family: one series, the first
// in the page (GIE's getLatestMetric keeps the latest timestamp, and vLLM's
// samples carry none, so the first wins). Its `engine` label, or "" if the
// family has no sample.
std::string DpPickerEngine(const std::string& page, const std::string& family) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(family + "{", 0) == 0) return DpLabel(line, "engine").value_or("none");
  return "";
}

// With --data-parallel-rank-port, each rank also has its own port: requests
// there run on that engine, and its /metrics holds that engine's series
// alone, so the picker, one endpoint per rank port, reads every engine. The
// main port keeps every engine's series (where the picker would read engine
// 0's only).
TEST(DataParallel, EachRankPortShowsThePickerItsOwnEngine) {
  const int base = DpFreePorts(2);
  ASSERT_GT(base, 0);
  ServeInstance serve(
      {"-dp", "2", "--api-server-count", "2", "--data-parallel-rank-port", std::to_string(base)});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  // A request on rank 1's port runs on engine 1, whatever the balancer thinks.
  for (int i = 0; i < 3; ++i) {
    const DpReply r = DpPost(base + 1, "/v1/completions", DpGreedyBody());
    ASSERT_EQ(r.status, 200) << r.raw;
  }
  const DpReply wrong = DpPost(base + 1, "/v1/completions", DpGreedyBody(), "0");
  EXPECT_EQ(wrong.status, 400) << wrong.raw;
  EXPECT_NE(wrong.raw.find("serves rank 1 only"), std::string::npos) << wrong.raw;
  const std::vector<std::string> picked = {"vllm:num_requests_waiting", "vllm:num_requests_running",
                                           "vllm:kv_cache_usage_perc", "vllm:cache_config_info"};
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string page = HttpClient(base + rank).Request("GET", "/metrics").body();
    for (const std::string& family : picked)
      EXPECT_EQ(DpPickerEngine(page, family), std::to_string(rank)) << family;
    // No other engine's sample at all; the families without the label stay.
    auto samples = ParseSamples(page);
    for (const auto& [key, value] : samples)
      EXPECT_EQ(DpLabel(key, "engine").value_or(std::to_string(rank)), std::to_string(rank)) << key;
    EXPECT_EQ(DpSum(samples, kDpSuccess), rank == 1 ? 3 : 0);
    EXPECT_GT(
        samples["http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"}"],
        0);
    EXPECT_EQ(HttpClient(base + rank).Request("GET", "/health").result_int(), 200);
  }
  // The main port: every engine's series; the picker would see engine 0 only.
  const std::string main_page = HttpClient(serve.port()).Request("GET", "/metrics").body();
  for (const std::string& family : picked) EXPECT_EQ(DpPickerEngine(main_page, family), "0");
  EXPECT_EQ(DpSeriesPerEngine(ParseSamples(main_page), "vllm:cache_config_info"),
            (std::map<std::string, int>{{"0", 1}, {"1", 1}}));
}

// A line of /proc/PID/status ("Cpus_allowed_list:\t0-3" gives "0-3"), or
// an environment variable of PID ("CUDA_VISIBLE_DEVICES").
std::string DpProcField(pid_t pid, const std::string& file, const std::string& prefix,
                        char separator) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
  for (std::string item; std::getline(in, item, separator);)
    if (item.rfind(prefix, 0) == 0) return item.substr(prefix.size());
  return "";
}

// Engine i runs on the i-th of this machine's CPUs when --engine-threads x
// engines fit, and sees the i-th CUDA device.
TEST(DataParallel, EachEngineGetsItsOwnCpusAndDevice) {
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof allowed, &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  ServeInstance serve({"--data-parallel-size", "2", "--device", "cpu"});  // --engine-threads 1
  ASSERT_GT(serve.port(), 0) << serve.Log();
  for (int i = 0; i < 2; ++i) {
    const pid_t engine = serve.Child("--engine-index " + std::to_string(i));
    ASSERT_GT(engine, 0);
    const std::string list = DpProcField(engine, "status", "Cpus_allowed_list:\t", '\n');
    if (cpus.size() >= 2)
      EXPECT_EQ(list, std::to_string(cpus[static_cast<std::size_t>(i)])) << "engine " << i;
    else
      EXPECT_NE(serve.Log().find("engines not pinned to CPUs"), std::string::npos);
    // --device cpu: no CUDA device handed out.
    EXPECT_EQ(DpProcField(engine, "environ", "CUDA_VISIBLE_DEVICES=", '\0'), "");
  }
  if (cpus.size() >= 2) {
    EXPECT_NE(serve.Log().find("engine 1: CPUs"), std::string::npos);
  }
}

}  // namespace
}  // namespace sightline::testing
