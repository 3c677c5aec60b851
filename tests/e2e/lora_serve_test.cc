// LoRA through `sightline serve` (issue 41): adapters from --lora-modules
// (both of vLLM's spellings) selected by the request's `model` on any of two
// API servers, listed by /v1/models with their parent and root, an unknown
// name a 404 with vLLM's error body, the metrics under the base model's
// name; and an adapter the runner cannot run refused at start by name.
// Run-time loads and unloads (POST /v1/load_lora_adapter,
// /v1/unload_lora_adapter) seen by both API servers, behind --api-key, each
// bad adapter one clear error while the server keeps serving, an unload
// letting a running request finish, and more adapters than --max-cpu-loras
// served (the least recently used evicted and read again).
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "e2e/serve_instance.h"
#include "lora/lora_adapter.h"
#include "support/http_client.h"

namespace sightline::testing {
namespace {

namespace fs = std::filesystem;
using engine::LoraModule;
using nlohmann::json;

class LoraServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("sightline-lora-serve-" + std::to_string(getpid()));
    ASSERT_TRUE(engine::PresetModelConfig("sightline-tiny", &base_).ok());
    using M = LoraModule;
    ASSERT_TRUE(engine::WriteLoraAdapter((dir_ / "a").string(), base_,
                                         engine::RandomLoraAdapter(
                                             base_, 8, 16, false, {M::kQ, M::kV, M::kO, M::kUp}, 1))
                    .ok());
    ASSERT_TRUE(
        engine::WriteLoraAdapter(
            (dir_ / "b").string(), base_,
            engine::RandomLoraAdapter(base_, 16, 32, true,
                                      {M::kQ, M::kK, M::kV, M::kO, M::kGate, M::kUp, M::kDown}, 2))
            .ok());
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  engine::ModelConfig base_;
};

json Complete(int port, const std::string& model, int* status = nullptr) {
  const json body = {{"model", model},
                     {"prompt", "Hello, adapters"},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const auto r = HttpClient(port).Post("/v1/completions", body.dump());
  if (status) *status = r.result_int();
  return json::parse(r.body());
}

TEST_F(LoraServeTest, TheModelFieldSelectsAnAdapterOnEveryApiServer) {
  ServeInstance serve({"--enable-lora", "--lora-modules", "a=" + (dir_ / "a").string(),
                       "--lora-modules",
                       json{{"name", "b"}, {"path", (dir_ / "b").string()}}.dump(), "--max-loras",
                       "2", "--api-server-count", "2"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const json models =
      json::parse(HttpClient(serve.port()).Request("GET", "/v1/models").body())["data"];
  ASSERT_EQ(models.size(), 3u) << models.dump();
  EXPECT_EQ(models[0]["id"], "sightline-tiny");
  EXPECT_TRUE(models[0]["parent"].is_null());
  EXPECT_EQ(models[1]["id"], "a");
  EXPECT_EQ(models[1]["parent"], "sightline-tiny");
  EXPECT_EQ(models[1]["root"], (dir_ / "a").string());
  EXPECT_EQ(models[2]["id"], "b");

  // Several requests each, so that both API servers answer some.
  std::map<std::string, std::string> text;
  for (int round = 0; round < 3; ++round)
    for (const char* model : {"sightline-tiny", "a", "b"}) {
      int status = 0;
      const json r = Complete(serve.port(), model, &status);
      ASSERT_EQ(status, 200) << r.dump();
      EXPECT_EQ(r["model"], model);
      const std::string t = r["choices"][0]["text"];
      if (round == 0) text[model] = t;
      EXPECT_EQ(t, text[model]) << model << ": the same adapter, the same greedy text";
    }
  EXPECT_NE(text["a"], text["sightline-tiny"]);
  EXPECT_NE(text["b"], text["sightline-tiny"]);
  EXPECT_NE(text["a"], text["b"]);

  int status = 0;
  const json unknown = Complete(serve.port(), "c", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(unknown["error"]["type"], "NotFoundError") << unknown.dump();
  EXPECT_EQ(unknown["error"]["param"], "model");

  // Request metrics keep the base model's name (vLLM's).
  const auto page = ParseSamples(HttpClient(serve.port()).Request("GET", "/metrics").body());
  EXPECT_EQ(page.at("vllm:request_success_total{engine=\"0\",finished_reason=\"length\","
                    "model_name=\"sightline-tiny\"}"),
            9);
}

constexpr const char* kKey = "lora-test-key";

HttpClient::Response AdminPost(int port, const std::string& path, const json& body,
                               bool with_key = true) {
  std::map<std::string, std::string> fields = {{"Content-Type", "application/json"}};
  if (with_key) fields["Authorization"] = std::string("Bearer ") + kKey;
  return HttpClient(port).Request("POST", path, fields, body.dump());
}

json KeyedComplete(int port, const std::string& model, int* status, int max_tokens = 8) {
  const json body = {{"model", model},
                     {"prompt", "Hello, adapters"},
                     {"max_tokens", max_tokens},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const auto r = HttpClient(port).Request(
      "POST", "/v1/completions",
      {{"Content-Type", "application/json"}, {"Authorization", std::string("Bearer ") + kKey}},
      body.dump());
  *status = r.result_int();
  return json::parse(r.body());
}

// Each of `rounds` new connections (the kernel spreads them over both API
// servers) answers `model` with `want`; an API server may hear of a change a
// moment after the one that made it, so each waits for it (at most 10 s).
void ExpectEveryApiServer(int port, const std::string& model, int want, int rounds = 12) {
  for (int i = 0; i < rounds; ++i) {
    int status = 0;
    json r;
    for (int tries = 0; tries < 100; ++tries) {
      r = KeyedComplete(port, model, &status);
      if (status == want) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ASSERT_EQ(status, want) << model << ": " << r.dump();
  }
}

TEST_F(LoraServeTest, AdaptersLoadAndUnloadAtRunTimeOnEveryApiServer) {
  using M = LoraModule;
  ASSERT_TRUE(engine::WriteLoraAdapter((dir_ / "c").string(), base_,
                                       engine::RandomLoraAdapter(base_, 8, 16, false, {M::kV}, 3))
                  .ok());
  ServeInstance serve({"--enable-lora", "--max-loras", "2", "--max-cpu-loras", "2",
                       "--api-server-count", "2", "--allow-runtime-lora-updating", "--api-key",
                       kKey});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const int port = serve.port();
  const std::string a = (dir_ / "a").string();

  // Behind --api-key; vLLM's checks and words.
  EXPECT_EQ(AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", a}}, false)
                .result_int(),
            401);
  auto r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", "a"}});
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(json::parse(r.body())["error"]["message"],
            "Both 'lora_name' and 'lora_path' must be provided.");
  r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", 7}, {"lora_path", a}});
  EXPECT_EQ(r.result_int(), 400) << r.body();

  r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", a}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  EXPECT_EQ(r.body(), "Success: LoRA adapter 'a' added successfully.");
  r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", a}});
  EXPECT_EQ(r.result_int(), 400);
  EXPECT_EQ(json::parse(r.body())["error"]["message"],
            "The lora adapter 'a' has already been loaded.");
  ExpectEveryApiServer(port, "a", 200);
  int status = 0;
  const std::string with_a = KeyedComplete(port, "a", &status)["choices"][0]["text"];
  const std::string base_text =
      KeyedComplete(port, "sightline-tiny", &status)["choices"][0]["text"];
  EXPECT_NE(with_a, base_text);

  // Each bad adapter: one clear error naming what is wrong; nothing changes.
  // Copies of b with one field of its config changed, a rank-32 adapter
  // (above --max-lora-rank 16), an adapter for another shape of model, a
  // path without one, and the base model's name.
  auto variant = [&](const std::string& name, const char* key, const json& value) {
    fs::create_directories(dir_ / name);
    fs::copy(dir_ / "b" / "adapter_model.safetensors", dir_ / name);
    std::ifstream config_in(dir_ / "b" / "adapter_config.json");
    json config = json::parse(config_in);
    config[key] = value;
    std::ofstream(dir_ / name / "adapter_config.json") << config.dump();
    return (dir_ / name).string();
  };
  engine::ModelConfig wider = base_;
  wider.hidden_size *= 2;
  ASSERT_TRUE(engine::WriteLoraAdapter((dir_ / "rank32").string(), base_,
                                       engine::RandomLoraAdapter(base_, 32, 32, false, {M::kQ}, 4))
                  .ok());
  ASSERT_TRUE(engine::WriteLoraAdapter((dir_ / "wider").string(), wider,
                                       engine::RandomLoraAdapter(wider, 8, 16, false, {M::kQ}, 5))
                  .ok());
  for (const auto& [name, path, code, words] :
       std::vector<std::tuple<std::string, std::string, int, std::string>>{
           {"d", variant("dora", "use_dora", true), 400, "DoRA"},
           {"e", variant("bias", "bias", "all"), 400, "biases"},
           {"f", variant("saved", "modules_to_save", json::array({"lm_head"})), 400,
            "modules_to_save"},
           {"g", (dir_ / "rank32").string(), 400, "--max-lora-rank"},
           {"h", (dir_ / "wider").string(), 400, "shape"},
           {"m", (dir_ / "missing").string(), 404, "missing"},
           {"sightline-tiny", a, 400, "base model"}}) {
    SCOPED_TRACE(name);
    r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", name}, {"lora_path", path}});
    EXPECT_EQ(r.result_int(), code) << r.body();
    EXPECT_NE(json::parse(r.body())["error"]["message"].get<std::string>().find(words),
              std::string::npos)
        << r.body();
    EXPECT_EQ(KeyedComplete(port, "sightline-tiny", &status)["choices"][0]["text"], base_text)
        << "the server keeps serving";
  }
  const json models = json::parse(
      HttpClient(port)
          .Request("GET", "/v1/models", {{"Authorization", std::string("Bearer ") + kKey}})
          .body())["data"];
  ASSERT_EQ(models.size(), 2u) << models.dump();
  EXPECT_EQ(models[1]["id"], "a");
  EXPECT_EQ(models[1]["root"], a);

  // Three adapters, two resident (--max-cpu-loras 2): each keeps its text.
  for (const char* name : {"b", "c"}) {
    r = AdminPost(port, "/v1/load_lora_adapter",
                  {{"lora_name", name}, {"lora_path", (dir_ / name).string()}});
    ASSERT_EQ(r.result_int(), 200) << r.body();
  }
  for (int round = 0; round < 2; ++round)
    for (const char* name : {"a", "b", "c"}) {
      const json out = KeyedComplete(port, name, &status);
      ASSERT_EQ(status, 200) << name << ": " << out.dump();
      if (std::string(name) == "a") {
        EXPECT_EQ(out["choices"][0]["text"], with_a);
      }
    }

  // An unload during a stream with the adapter: the stream ends whole; new
  // requests get the unknown-model 404 on every API server. (Whether the
  // engine was still generating when the unload came depends on the
  // machine's pace; LoraRunner.AnUnloadLetsTheRunningRequestFinishWithTheAdapter
  // shows that case deterministically.)
  std::string unloaded;
  std::string stream_text;
  HttpClient(port).Stream(
      "POST", "/v1/completions",
      {{"Content-Type", "application/json"}, {"Authorization", std::string("Bearer ") + kKey}},
      json{{"model", "a"},
           {"prompt", "Hello, adapters"},
           {"max_tokens", 200},
           {"temperature", 0},
           {"ignore_eos", true},
           {"stream", true}}
          .dump(),
      [&](std::string_view piece) {
        stream_text += piece;
        if (unloaded.empty())
          unloaded = AdminPost(port, "/v1/unload_lora_adapter", {{"lora_name", "a"}}).body();
      });
  EXPECT_EQ(unloaded, "Success: LoRA adapter 'a' removed successfully.");
  EXPECT_NE(stream_text.find("\"finish_reason\":\"length\""), std::string::npos) << stream_text;
  EXPECT_NE(stream_text.find("[DONE]"), std::string::npos);
  ExpectEveryApiServer(port, "a", 404);
  r = AdminPost(port, "/v1/unload_lora_adapter", {{"lora_name", "a"}});
  EXPECT_EQ(r.result_int(), 404);
  EXPECT_EQ(json::parse(r.body())["error"]["message"], "The lora adapter 'a' cannot be found.");
  EXPECT_EQ(json::parse(r.body())["error"]["type"], "NotFoundError");
  // Loaded again: the same weights, the same text.
  r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", a}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  ExpectEveryApiServer(port, "a", 200, 4);
  EXPECT_EQ(KeyedComplete(port, "a", &status)["choices"][0]["text"], with_a);
}

// vllm:lora_requests_info read as the llm-d endpoint picker reads it
// (gateway-api-inference-extension's getLatestLoraMetric): among the
// family's series the one with the largest value, its running and waiting
// adapters split on commas, max_lora as an integer.
struct LoraInfo {
  int series = 0;
  double value = 0;
  std::string max_lora;
  std::set<std::string> running, waiting;
};

LoraInfo ReadLoraInfo(int port) {
  const std::string page = HttpClient(port).Request("GET", "/metrics").body();
  LoraInfo info;
  const std::regex line(R"(^vllm:lora_requests_info\{([^}]*)\} (\S+)$)");
  const std::regex label(R"re((\w+)="([^"]*)")re");
  std::istringstream lines(page);
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, line)) continue;
    ++info.series;
    const double value = std::stod(m[2]);
    if (info.series > 1 && value <= info.value) continue;
    info.value = value;
    info.running.clear();
    info.waiting.clear();
    const std::string labels = m[1];
    for (std::sregex_iterator it(labels.begin(), labels.end(), label), end; it != end; ++it) {
      const std::string name = (*it)[1], v = (*it)[2];
      if (name == "max_lora") info.max_lora = v;
      std::set<std::string>* set = name == "running_lora_adapters"   ? &info.running
                                   : name == "waiting_lora_adapters" ? &info.waiting
                                                                     : nullptr;
      if (!set) continue;
      std::istringstream parts(v);
      for (std::string part; std::getline(parts, part, ',');)
        if (!part.empty()) set->insert(part);
    }
  }
  return info;
}

TEST_F(LoraServeTest, LoraRequestsInfoShowsTheRunningAndWaitingAdaptersAsThePickerReadsThem) {
  ServeInstance serve({"--enable-lora", "--lora-modules", "a=" + (dir_ / "a").string(),
                       "--lora-modules", "b=" + (dir_ / "b").string(), "--max-loras", "1",
                       "--max-num-seqs", "4"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const int port = serve.port();
  const double start = static_cast<double>(std::time(nullptr));
  LoraInfo idle = ReadLoraInfo(port);
  EXPECT_EQ(idle.series, 1) << "present from start-up, so the picker finds it";
  EXPECT_EQ(idle.max_lora, "1");
  EXPECT_TRUE(idle.running.empty());
  EXPECT_TRUE(idle.waiting.empty());
  EXPECT_GE(idle.value, start - 60) << "the Unix time of the update";

  // Long requests, one after another per adapter: with --max-loras 1 one
  // adapter's runs while the other's waits, for as long as they last (a
  // second or more, however fast the machine: the tiny model takes ~0.2 s
  // per request here).
  std::vector<std::thread> clients;
  for (const char* model : {"a", "b"})
    clients.emplace_back([port, model] {
      const json body = {{"model", model},
                         {"prompt", "Hello, adapters"},
                         {"max_tokens", 1500},
                         {"temperature", 0},
                         {"ignore_eos", true}};
      for (int i = 0; i < 6; ++i) HttpClient(port).Post("/v1/completions", body.dump());
    });
  bool seen = false;
  for (int i = 0; i < 600 && !seen; ++i) {
    const LoraInfo busy = ReadLoraInfo(port);
    EXPECT_LE(busy.series, 1);
    EXPECT_LE(busy.running.size(), 1u) << "--max-loras 1";
    seen = busy.running.size() == 1 && busy.waiting.size() == 1 &&
           *busy.running.begin() != *busy.waiting.begin();
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(seen) << "never saw one adapter running and the other waiting";
  for (std::thread& t : clients) t.join();
  // Done: nothing running or waiting, still one series.
  LoraInfo after;
  for (int i = 0; i < 100; ++i) {
    after = ReadLoraInfo(port);
    if (after.running.empty() && after.waiting.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(after.series, 1);
  EXPECT_TRUE(after.running.empty() && after.waiting.empty());
  EXPECT_GE(after.value, idle.value);
}

TEST_F(LoraServeTest, RunTimeUpdatesAreOffUnlessAllowed) {
  ServeInstance serve({"--enable-lora"});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const auto r = AdminPost(serve.port(), "/v1/load_lora_adapter",
                           {{"lora_name", "a"}, {"lora_path", (dir_ / "a").string()}}, false);
  EXPECT_EQ(r.result_int(), 404) << r.body();
}

TEST_F(LoraServeTest, AnAdapterTheRunnerCannotRunIsRefusedAtStartByName) {
  std::ifstream in(dir_ / "a" / "adapter_config.json");
  json config = json::parse(in);
  config["use_dora"] = true;
  std::ofstream(dir_ / "a" / "adapter_config.json") << config.dump();
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--enable-lora", "--lora-modules", "a=" + (dir_ / "a").string()},
        {"--enable-lora", "--lora-modules", "b=" + (dir_ / "b").string(), "--max-lora-rank", "8"},
        {"--enable-lora", "--lora-modules", "a=" + (dir_ / "missing").string()},
        {"--enable-lora", "--lora-modules", "sightline-tiny=" + (dir_ / "b").string()},
        {"--enable-lora", "--lora-modules", "b=" + (dir_ / "b").string(), "--lora-modules",
         "b=" + (dir_ / "b").string()},
        {"--enable-lora", "--lora-modules", "no-path"},
        {"--enable-lora", "--max-loras", "0"},
        {"--enable-lora", "--max-loras", "2", "--max-cpu-loras", "1"},
        {"--lora-modules", "b=" + (dir_ / "b").string()}}) {
    SCOPED_TRACE(args[1] + " " + args.back());
    ServeInstance serve(args);
    const auto code = serve.WaitExit(20);
    ASSERT_TRUE(code.has_value()) << "did not fail";
    EXPECT_EQ(*code, 1);
    const std::string log = serve.Log();
    EXPECT_EQ(log.rfind("sightline: error: ", 0), 0u) << log;
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  }
  ServeInstance dora({"--enable-lora", "--lora-modules", "a=" + (dir_ / "a").string()});
  ASSERT_TRUE(dora.WaitExit(20).has_value());
  EXPECT_NE(dora.Log().find("DoRA"), std::string::npos) << dora.Log();
}

// Data parallelism: a run-time load goes to every engine (the same greedy
// text on each); an engine restarted since has only its --lora-modules, so
// the adapter's requests go to the others (pinned to it: 503), and an unload
// then load gives it back everywhere.
TEST_F(LoraServeTest, UnderDataParallelismAnAdapterIsServedWhereItIsLoaded) {
  ServeInstance serve({"--enable-lora", "--data-parallel-size", "2", "--api-server-count", "2",
                       "--allow-runtime-lora-updating", "--api-key", kKey});
  ASSERT_GT(serve.port(), 0) << serve.Log();
  const int port = serve.port();
  const std::string a = (dir_ / "a").string();
  auto on_rank = [&](const std::string& model, const char* rank, int* status) {
    const json body = {{"model", model},
                       {"prompt", "Hello, adapters"},
                       {"max_tokens", 8},
                       {"temperature", 0},
                       {"ignore_eos", true}};
    const auto r = HttpClient(port).Request("POST", "/v1/completions",
                                            {{"Content-Type", "application/json"},
                                             {"Authorization", std::string("Bearer ") + kKey},
                                             {"X-data-parallel-rank", rank}},
                                            body.dump());
    *status = r.result_int();
    return json::parse(r.body(), nullptr, false);
  };
  auto r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", a}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  ExpectEveryApiServer(port, "a", 200);
  int s0 = 0, s1 = 0;
  const json on0 = on_rank("a", "0", &s0), on1 = on_rank("a", "1", &s1);
  ASSERT_EQ(s0, 200) << on0.dump();
  ASSERT_EQ(s1, 200) << on1.dump();
  EXPECT_EQ(on0["choices"][0]["text"], on1["choices"][0]["text"]);

  // Engine 1 dies and comes back without the adapter.
  const pid_t victim = serve.Child("--engine-index 1");
  ASSERT_GT(victim, 0);
  ASSERT_EQ(kill(victim, SIGKILL), 0);
  int base = 0;
  for (int i = 0; i < 600 && base != 200; ++i) {
    on_rank("sightline-tiny", "1", &base);
    if (base != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(base, 200) << serve.Log();
  ExpectEveryApiServer(port, "a", 200);  // engine 0 serves it
  int pinned = 0;
  const json refused = on_rank("a", "1", &pinned);
  EXPECT_EQ(pinned, 503) << refused.dump();
  // Unload (engine 1 does not know it: still a success) and load again.
  r = AdminPost(port, "/v1/unload_lora_adapter", {{"lora_name", "a"}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  ExpectEveryApiServer(port, "a", 404);
  r = AdminPost(port, "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", a}});
  ASSERT_EQ(r.result_int(), 200) << r.body();
  ExpectEveryApiServer(port, "a", 200);
  for (int i = 0; i < 100 && pinned != 200; ++i) {
    on_rank("a", "1", &pinned);
    if (pinned != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(pinned, 200);
}

}  // namespace
}  // namespace sightline::testing
