// `sightline serve` end to end: a real supervisor, engine and API servers on
// loopback, driven by several clients while /metrics is scraped. Counts must
// be exact, counters must never go down, and every failure path (an API
// server or the engine SIGKILLed, SIGTERM under load, bad flags) must end
// the way DESIGN.md §1 says, with no process left behind.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <regex>
#include <thread>

#include "e2e/load.h"
#include "e2e/serve_instance.h"
#include "support/loopback.h"

namespace sightline::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kRunningKey = Key("vllm:num_requests_running");
const std::string kLength = Key("vllm:request_success_total", "finished_reason=\"length\",");
const std::string kStreamed = "sightline:stream_outcomes_total{handler=\"/v1/completions\",";

TEST(Serve, ThreeApiServersCountExactly) {
  ServeInstance serve({"--api-server-count", "3"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  EXPECT_EQ(serve.Children().size(), 4u);  // the engine and three API servers
  constexpr int kClients = 4, kPerClient = 50, kPrompt = 16, kMax = 8;
  constexpr int kN = kClients * kPerClient;
  Scraper scraper(serve.port());
  std::vector<std::future<int>> clients;
  for (int c = 0; c < kClients; ++c)
    clients.push_back(std::async(std::launch::async, [&, c] {
      int ok = 0;
      for (int i = 0; i < kPerClient; ++i)
        ok += Complete(serve.port(), kPrompt, kMax, (i + c) % 2 == 0).ok;
      return ok;
    }));
  int ok = 0;
  for (auto& c : clients) ok += c.get();
  // The load may be over in well under a second: let the scraper reach 20
  // pages (those during the load and after it) before judging them.
  for (int i = 0; i < 200 && scraper.scrapes() < 20; ++i) std::this_thread::sleep_for(50ms);
  scraper.Stop();
  EXPECT_EQ(ok, kN);
  EXPECT_GE(scraper.scrapes(), 20);
  EXPECT_TRUE(scraper.problems().empty()) << scraper.problems().front();

  // Sampled every second: the CPU the load cost shows up within a few.
  EXPECT_TRUE(WaitForPage(
      serve.port(), [](auto p) { return p["process_cpu_seconds_total"] > 0; }, 5s));
  // Whichever API server answers, the page is the whole instance's.
  for (int i = 0; i < 6; ++i) {
    auto p = Scrape(serve.port());
    EXPECT_EQ(p[kLength], kN);
    EXPECT_EQ(p[Key("vllm:prompt_tokens_total")], kN * (kPrompt + 1));  // + BOS
    EXPECT_EQ(p[Key("vllm:generation_tokens_total")], kN * kMax);
    EXPECT_EQ(p[Key("vllm:time_to_first_token_seconds_count")], kN);
    EXPECT_EQ(p[Key("vllm:inter_token_latency_seconds_count")], kN * (kMax - 1));
    EXPECT_EQ(p[Key("vllm:e2e_request_latency_seconds_count")], kN);
    EXPECT_EQ(p["http_requests_total{handler=\"/v1/completions\",method=\"POST\",status=\"2xx\"}"],
              kN);
    EXPECT_EQ(p[kRunningKey], 0);
    EXPECT_EQ(p["sightline:api_server_restarts_total"], 0);
    EXPECT_EQ(p["sightline:registry_slots_in_use"], 5);  // supervisor, engine, 3 API servers
    EXPECT_EQ(p[kStreamed + "outcome=\"completed\"}"], kN / 2);
    EXPECT_EQ(p[kStreamed + "outcome=\"error_after_headers\"}"], 0);
    // The instance's processes (METRICS.md §7), not just the one scraped.
    EXPECT_GT(p["process_resident_memory_bytes"], 5 * 1e6);
    EXPECT_GT(p["process_open_fds"], 5 * 4);
    EXPECT_GT(p["process_start_time_seconds"], 1.7e9);
  }
}

TEST(Serve, ApiServerKilledMidLoadIsRestartedAndNothingIsLost) {
  ServeInstance serve({"--api-server-count", "3"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  constexpr int kClients = 6, kPerClient = 20, kMax = 96;
  Scraper scraper(serve.port());
  std::atomic<int> finished{0};
  std::vector<std::future<std::vector<Outcome>>> clients;
  for (int c = 0; c < kClients; ++c)
    clients.push_back(std::async(std::launch::async, [&] {
      std::vector<Outcome> out;
      for (int i = 0; i < kPerClient; ++i) {
        out.push_back(Complete(serve.port(), 8, kMax, true));
        ++finished;
      }
      return out;
    }));
  while (finished < kClients * 2) std::this_thread::sleep_for(10ms);
  double before = 0;
  ASSERT_TRUE(WaitForPage(serve.port(), [&](auto p) { return (before = p[kLength]) > 0; }));
  const pid_t victim = serve.Child("--api-server-index 1");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);

  int ok = 0, failed = 0;
  for (auto& c : clients)
    for (const Outcome& o : c.get()) {
      ok += o.ok;
      if (!o.ok) {
        ++failed;
        EXPECT_EQ(o.status, 0) << "only a dropped connection may fail: " << o.failure;
      }
    }
  // At most the requests the victim was answering fail: one per client.
  EXPECT_LE(failed, kClients);
  EXPECT_EQ(ok + failed, kClients * kPerClient);

  // Restarted with the same index, counted, and serving again.
  ASSERT_TRUE(WaitForPage(serve.port(), [](auto p) {
    return p["sightline:api_server_restarts_total"] == 1;
  })) << serve.Log();
  // Counted when it died; started again after a back-off: look for the new
  // process once it says it serves.
  for (int i = 0; i < 200 && serve.Log().find("is serving again") == std::string::npos; ++i)
    std::this_thread::sleep_for(50ms);
  ASSERT_NE(serve.Log().find("api-server 1 (pid"), std::string::npos) << serve.Log();
  ASSERT_NE(serve.Log().find("is serving again"), std::string::npos) << serve.Log();
  EXPECT_GT(serve.Child("--api-server-index 1"), 0);
  for (int i = 0; i < 9; ++i) EXPECT_TRUE(Complete(serve.port(), 8, 4, i % 2).ok);
  scraper.Stop();
  EXPECT_TRUE(scraper.problems().empty()) << scraper.problems().front();

  // The victim's finished requests stay in the totals; the ones it was
  // answering when it died were never counted as finished.
  auto p = Scrape(serve.port());
  EXPECT_GE(p[kLength], before);
  EXPECT_GE(p[kLength], ok + 9);
  EXPECT_LE(p[kLength], ok + failed + 9);
  EXPECT_TRUE(WaitForPage(serve.port(), [](auto q) { return q[kRunningKey] == 0; }));
}

TEST(Serve, EngineKilledMeans503FailedStreamsAndExitWithoutOrphans) {
  ServeInstance serve({"--api-server-count", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const std::vector<pid_t> children = serve.Children();
  ASSERT_EQ(children.size(), 3u);
  std::vector<std::future<Outcome>> streams;
  for (int i = 0; i < 3; ++i)
    streams.push_back(
        std::async(std::launch::async, [&] { return Complete(serve.port(), 8, 2000, true); }));
  ASSERT_TRUE(WaitForPage(serve.port(), [](auto p) { return p[kRunningKey] == 3; }));

  ASSERT_EQ(kill(serve.Child(" engine "), SIGKILL), 0);
  const auto killed = Clock::now();
  bool unhealthy = false;
  while (!unhealthy && Clock::now() - killed < 2s) {
    try {
      unhealthy = HttpClient(serve.port()).Request("GET", "/health").result_int() == 503;
    } catch (const std::exception&) {
    }
    if (!unhealthy) std::this_thread::sleep_for(50ms);
  }
  EXPECT_TRUE(unhealthy) << "/health was not 503 within 2 s of the engine's death";
  for (auto& s : streams) {
    ASSERT_EQ(s.wait_for(10s), std::future_status::ready) << "a stream hung";
    const Outcome o = s.get();
    EXPECT_FALSE(o.ok);
    EXPECT_TRUE(o.error_event || o.status == 0) << o.failure;
  }
  // Counted as streams that failed after their headers (the API servers
  // still answer during the supervisor's grace period).
  EXPECT_TRUE(WaitForPage(
      serve.port(), [](auto p) { return p[kStreamed + "outcome=\"error_after_headers\"}"] == 3; },
      2s));
  const auto code = serve.WaitExit(20);
  ASSERT_TRUE(code.has_value()) << "the supervisor did not exit";
  EXPECT_EQ(*code, 1);
  EXPECT_TRUE(AllGone(children, 5)) << "orphans left";
  EXPECT_FALSE(SegmentExists(serve.registry()));
}

TEST(Serve, SigtermDrainsRequestsUnderWayThenExitsCleanly) {
  ServeInstance serve({"--api-server-count", "2", "--shutdown-timeout", "30"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const std::vector<pid_t> children = serve.Children();
  std::vector<std::future<Outcome>> streams;
  for (int i = 0; i < 4; ++i)
    streams.push_back(std::async(std::launch::async,
                                 [&, i] { return Complete(serve.port(), 8, 1500, i % 2 == 0); }));
  ASSERT_TRUE(WaitForPage(serve.port(), [](auto p) { return p[kRunningKey] == 4; }));
  ASSERT_EQ(kill(serve.pid(), SIGTERM), 0);
  // The same stop delivered twice (`timeout` forwarding what a group kill
  // also sent) still drains and cleans up; only a later one is impatience.
  ASSERT_EQ(kill(serve.pid(), SIGTERM), 0);
  for (auto& s : streams) {
    ASSERT_EQ(s.wait_for(30s), std::future_status::ready);
    const Outcome o = s.get();
    EXPECT_TRUE(o.ok) << o.failure;
  }
  const auto code = serve.WaitExit(30);
  ASSERT_TRUE(code.has_value()) << "the supervisor did not exit";
  EXPECT_EQ(*code, 0) << serve.Log();
  EXPECT_TRUE(AllGone(children, 5));
  EXPECT_FALSE(SegmentExists(serve.registry()));
  EXPECT_NE(serve.Log().find("draining"), std::string::npos);
  std::smatch run_dir;
  const std::string log = serve.Log();
  ASSERT_TRUE(std::regex_search(log, run_dir, std::regex("run directory (\\S+)")));
  EXPECT_FALSE(std::filesystem::exists(run_dir[1].str())) << run_dir[1];
}

TEST(Serve, GivesUpWhenAnApiServerKeepsDying) {
  ServeInstance serve({"--api-server-max-restarts", "1"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  ASSERT_EQ(kill(serve.Child("api-server"), SIGKILL), 0);
  ASSERT_TRUE(WaitForPage(serve.port(),
                          [](auto p) { return p["sightline:api_server_restarts_total"] == 1; }));
  const std::vector<pid_t> children = serve.Children();
  ASSERT_EQ(kill(serve.Child("api-server"), SIGKILL), 0);
  const auto code = serve.WaitExit(20);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  EXPECT_NE(serve.Log().find("giving up"), std::string::npos) << serve.Log();
  EXPECT_TRUE(AllGone(children, 5));
}

TEST(Serve, AnEngineThatFailsToStartFailsStartUpWithItsError) {
  // A model whose config is fine (so the flag checks pass) but whose weights
  // are truncated: only the engine finds out, while loading.
  const std::string dir = "/tmp/" + UniqueInstance() + "-model";
  ASSERT_EQ(ChildProcess::Exec({SIGHTLINE_CLI, "make-model", dir}).Wait(), 0);
  std::filesystem::resize_file(dir + "/model.safetensors", 100);
  ServeInstance serve({dir});
  const auto code = serve.WaitExit(30);
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 1);
  const std::string log = serve.Log();
  EXPECT_NE(log.find("the engine exited during start-up"), std::string::npos) << log;
  EXPECT_NE(log.find("sightline: error: "), std::string::npos) << log;  // the engine's own line
  EXPECT_FALSE(SegmentExists(serve.registry()));
  std::filesystem::remove_all(dir);
}

TEST(Serve, ServesAModelDirectory) {
  // A real Hugging Face directory (config.json + safetensors, BF16) with no
  // tokenizer file: served with the byte tokenizer, as the log says.
  const std::string dir = "/tmp/" + UniqueInstance() + "-model";
  ASSERT_EQ(ChildProcess::Exec({SIGHTLINE_CLI, "make-model", dir, "--dtype", "bf16"}).Wait(), 0);
  {
    ServeInstance serve({dir, "--served-model-name", "my-model"});
    ASSERT_GT(serve.port(), 0) << serve.Log();
    EXPECT_NE(serve.Log().find("using the byte tokenizer"), std::string::npos) << serve.Log();
    const Outcome o = Complete(serve.port(), 8, 4, true);
    EXPECT_TRUE(o.ok) << o.failure;
    auto r = HttpClient(serve.port()).Request("GET", "/v1/models");
    EXPECT_NE(r.body().find("\"my-model\""), std::string::npos) << r.body();
  }
  std::filesystem::remove_all(dir);
}

// A base model as users bring one (issue 45): a real Llama-2-style tokenizer
// (Mistral 7B v0.1's tokenizer.json, and a tokenizer_config.json without
// chat_template) beside the weights. The instance serves completions,
// /tokenize and /v1/models; chat and responses requests get a 400 saying
// how to give a template, from every API server; the log says so once.
// With --chat-template, chat is served.
TEST(Serve, ServesABaseModelWithoutAChatTemplate) {
  const std::string dir = "/tmp/" + UniqueInstance() + "-base-model";
  ASSERT_EQ(ChildProcess::Exec({SIGHTLINE_CLI, "make-model", dir, "--vocab-size", "32000"}).Wait(),
            0);
  const std::string tokenizer = std::string(SIGHTLINE_TOKENIZER_TESTDATA) + "/mistral_7b/";
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"})
    std::filesystem::copy_file(tokenizer + file, dir + "/" + file,  // over make-model's own
                               std::filesystem::copy_options::overwrite_existing);
  {
    ServeInstance serve({dir, "--api-server-count", "2"});
    ASSERT_GT(serve.port(), 0) << serve.Log();
    const std::string chat =
        R"({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 3})";
    for (int i = 0; i < 6; ++i) {  // new connections: both API servers answer
      auto r =
          HttpClient(serve.port())
              .Post("/v1/completions", R"({"prompt": "The capital of France", "max_tokens": 3})");
      EXPECT_EQ(r.result_int(), 200) << r.body();
      r = HttpClient(serve.port()).Post("/tokenize", R"({"prompt": "Hello world"})");
      EXPECT_EQ(r.result_int(), 200) << r.body();
      EXPECT_NE(r.body().find("\"tokens\":[1,"), std::string::npos) << r.body();  // <s> first
      for (const char* path : {"/v1/chat/completions", "/v1/chat/completions/render"}) {
        r = HttpClient(serve.port()).Post(path, chat);
        EXPECT_EQ(r.result_int(), 400) << path << ": " << r.body();
        EXPECT_NE(r.body().find("--chat-template"), std::string::npos) << r.body();
        EXPECT_NE(r.body().find("BadRequestError"), std::string::npos) << r.body();
      }
      r = HttpClient(serve.port())
              .Post("/v1/responses", R"({"input": "Hello", "max_output_tokens": 3})");
      EXPECT_EQ(r.result_int(), 400) << r.body();
      EXPECT_NE(r.body().find("--chat-template"), std::string::npos) << r.body();
    }
    EXPECT_EQ(HttpClient(serve.port()).Request("GET", "/v1/models").result_int(), 200);
    const std::string log = serve.Log();
    const std::string warning = "defines no chat template";
    const auto first = log.find(warning);
    EXPECT_NE(first, std::string::npos) << log;
    EXPECT_EQ(log.find(warning, first + 1), std::string::npos) << "said more than once: " << log;
  }
  {
    ServeInstance serve({dir, "--chat-template", "llama-2"});
    ASSERT_GT(serve.port(), 0) << serve.Log();
    auto r = HttpClient(serve.port())
                 .Post("/v1/chat/completions",
                       R"({"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 3})");
    EXPECT_EQ(r.result_int(), 200) << r.body();
    EXPECT_EQ(serve.Log().find("defines no chat template"), std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

// vllm:request_num_preemptions (issue 45): a KV cache of 8 usable blocks of 16
// tokens under 8 concurrent requests that each grow to 90 tokens preempts;
// every finished request is observed once, and the per-request counts sum
// to the engine's vllm:num_preemptions_total, across 2 API servers.
TEST(Serve, EveryPreemptionIsCountedOnTheRequestItHit) {
  ServeInstance serve({"--num-gpu-blocks-override", "9", "--block-size", "16", "--max-model-len",
                       "128", "--api-server-count", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  constexpr int kN = 8;
  std::vector<std::future<Outcome>> requests;
  for (int i = 0; i < kN; ++i)
    requests.push_back(std::async(
        std::launch::async, [&, i] { return Complete(serve.port(), 20 + i, 70, i % 2 == 0); }));
  for (auto& r : requests) {
    const Outcome o = r.get();
    EXPECT_TRUE(o.ok) << o.failure;
  }
  std::map<std::string, double> page;
  ASSERT_TRUE(WaitForPage(serve.port(), [&](auto p) {
    page = p;
    return p[Key("vllm:request_num_preemptions_count")] == kN;
  })) << "not every finished request was observed";
  EXPECT_GT(page[Key("vllm:num_preemptions_total")], 0) << "nothing was preempted: untested";
  EXPECT_EQ(page[Key("vllm:request_num_preemptions_sum")], page[Key("vllm:num_preemptions_total")]);
  EXPECT_EQ(page[Key("vllm:request_num_preemptions_bucket", "le=\"+Inf\",")], kN);
}

// A Gemma 3 checkpoint whose sliding and global layers keep separate KV
// tables (issue 45): a block holds one layer's tokens (3 layers, 1 global:
// groups of 1), so 16 MiB of KV is 1,024 blocks of 16 tokens (one group of
// all 3 layers would be 341), and concurrent streams complete.
TEST(Serve, ServesAGemma3CheckpointWithKvGroups) {
  const std::string dir = "/tmp/" + UniqueInstance() + "-gemma3";
  ASSERT_EQ(ChildProcess::Exec({SIGHTLINE_CLI, "make-model", dir, "--family", "gemma3_text",
                                "--preset", "sightline-small", "--config-patch",
                                R"({"sliding_window": 16, "sliding_window_pattern": 2})"})
                .Wait(),
            0);
  {
    ServeInstance serve({dir, "--kv-cache-memory", "16777216"});
    ASSERT_GT(serve.port(), 0) << serve.Log();
    std::vector<std::future<Outcome>> streams;
    for (int i = 0; i < 6; ++i)
      streams.push_back(std::async(
          std::launch::async, [&, i] { return Complete(serve.port(), 40 + 7 * i, 24, true); }));
    for (auto& f : streams) {
      const Outcome o = f.get();
      EXPECT_TRUE(o.ok) << o.failure;
    }
    const std::string page = HttpClient(serve.port()).Request("GET", "/metrics").body();
    EXPECT_NE(page.find("num_gpu_blocks=\"1024\""), std::string::npos) << page.substr(0, 3000);
  }
  std::filesystem::remove_all(dir);
}

// A Qwen3-MoE checkpoint with a dense layer and Llama's projection biases
// beside it, served from their directories (issue 45): streams complete and
// the MFU estimate counts the mixture's work.
TEST(Serve, ServesQwen3MoeAndBiasedLlamaCheckpoints) {
  const std::vector<std::pair<std::string, std::string>> models = {
      {"qwen3_moe", R"({"mlp_only_layers": [1], "norm_topk_prob": true})"},
      {"llama", R"({"attention_bias": true, "mlp_bias": true})"}};
  for (const auto& [family, patch] : models) {
    SCOPED_TRACE(family);
    const std::string dir = "/tmp/" + UniqueInstance() + "-" + family;
    ASSERT_EQ(ChildProcess::Exec({SIGHTLINE_CLI, "make-model", dir, "--family", family, "--preset",
                                  "sightline-small", "--config-patch", patch})
                  .Wait(),
              0);
    {
      ServeInstance serve({dir, "--enable-mfu-metrics", "--served-model-name", "sightline-tiny"});
      ASSERT_GT(serve.port(), 0) << serve.Log();
      std::vector<std::future<Outcome>> streams;
      for (int i = 0; i < 4; ++i)
        streams.push_back(std::async(std::launch::async,
                                     [&, i] { return Complete(serve.port(), 30 + i, 8, i % 2); }));
      for (auto& f : streams) {
        const Outcome o = f.get();
        EXPECT_TRUE(o.ok) << o.failure;
      }
      EXPECT_TRUE(WaitForPage(serve.port(), [](auto p) {
        return p[Key("vllm:generation_tokens_total")] == 32 &&
               p[Key("vllm:estimated_flops_per_gpu_total")] > 0;
      })) << "the tokens or the MFU estimate never showed";
    }
    std::filesystem::remove_all(dir);
  }
}

// The CPU's narrow weight formats served for real: each format's kernels
// (on this CPU, the dot-product ones where it has them) behind the whole
// stack, a batch of concurrent streams and single requests, counted exactly.
TEST(Serve, ServesNarrowCpuWeightsInEveryFormat) {
  const std::vector<std::vector<std::string>> formats = {
      {"--dtype", "bfloat16"}, {"--dtype", "float16"}, {"--quantization", "int8"}};
  for (const auto& flags : formats) {
    ServeInstance serve(flags);
    ASSERT_GT(serve.port(), 0) << serve.Log();
    EXPECT_NE(serve.Log().find("CPU kernels"), std::string::npos) << serve.Log();
    constexpr int kN = 12, kMax = 6;
    std::vector<std::future<Outcome>> streams;
    for (int i = 0; i < kN; ++i)
      streams.push_back(std::async(
          std::launch::async, [&, i] { return Complete(serve.port(), 10 + i, kMax, i % 2 == 0); }));
    int ok = 0;
    for (auto& s : streams) {
      const Outcome o = s.get();
      ok += o.ok;
      EXPECT_TRUE(o.ok) << flags.back() << ": " << o.failure;
    }
    EXPECT_EQ(ok, kN);
    EXPECT_TRUE(WaitForPage(
        serve.port(), [&](auto p) { return p[Key("vllm:generation_tokens_total")] == kN * kMax; },
        5s))
        << flags.back();
  }
}

TEST(Serve, BadFlagsFailBeforeAnythingStarts) {
  int busy_port = 0;
  const int busy = ListenLoopback(&busy_port);
  ASSERT_GE(busy, 0);
  const std::vector<std::vector<std::string>> bad = {
      {"--api-server-count", "0"},
      {"--api-server-count", "63"},  // 65 registry slots needed, 64 by default
      {"--max-num-seqs", "0"},
      {"--block-size", "5000"},
      {"--device", "tpu"},
      {"--device", "cuda", "--gpu-memory-utilization", "0"},
      {"--dtype", "float8"},
      {"--quantization", "int4"},
      {"--quantization", "int8", "--dtype", "bfloat16"},  // one weight format, not two
      {"--max-model-len", "999999"},
      {"--scheduling-policy", "lifo"},
      {"--stream-interval", "0"},
      {"--kv-cache-metrics-sample", "2"},
      {"--enable-per-request-metrics", "--disable-log-stats"},
      {"--enable-mfu-metrics", "--disable-log-stats"},
      {"--speculative-config", R"({"method": "eagle", "num_speculative_tokens": 3})"},
      {"--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 0})"},
      {"--speculative-config", R"({"method": "ngram", "num_speculative_tokens": 2,
                                   "prompt_lookup_min": 6, "prompt_lookup_max": 3})"},
      {"--speculative-config", "{not json"},
      {"--kv-events-config", R"({"enable_kv_cache_events": true, "bogus": 1})"},
      {"--kv-events-config", R"({"enable_kv_cache_events": true, "publisher": "kafka"})"},
      {"--kv-events-config", R"({"enable_kv_cache_events": true, "buffer_steps": 0})"},
      {"--kv-events-config", R"({"enable_kv_cache_events": true})", "--no-enable-prefix-caching"},
      // The per-request object needs the per-request metrics and speculation.
      {"--enable-per-request-metrics", "--per-request-spec-decode-metrics", "summary"},
      {"--per-request-spec-decode-metrics", "detailed", "--speculative-config",
       R"({"method": "ngram", "num_speculative_tokens": 2})"},
      {"--enable-per-request-metrics", "--per-request-spec-decode-metrics", "verbose"},
      {"--tokenizer", "/nonexistent/tokenizer.json"},
      {"/nonexistent-model-dir"},
      {"--show-hidden-metrics-for-version", "latest"},
      {"--port", std::to_string(busy_port)},
      {"--no-such-flag"},
  };
  for (const auto& args : bad) {
    ServeInstance serve(args);
    const auto code = serve.WaitExit(10);
    ASSERT_TRUE(code.has_value()) << args[0] << " did not fail";
    EXPECT_EQ(*code, 1) << args[0];
    const std::string log = serve.Log();
    EXPECT_EQ(log.rfind("sightline: error: ", 0), 0u) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    EXPECT_FALSE(SegmentExists(serve.registry())) << args[0];
  }
  close(busy);
}

}  // namespace
}  // namespace sightline::testing
