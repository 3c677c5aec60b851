// vLLM's render endpoints and ORCA load report (issue 42), in process: a
// real HttpServer + OpenAiServer + EngineClient over the IPC protocol to a
// FakeEngine that records the prompt ids it is sent. For every tokenizer in
// the test data, /v1/completions/render and /v1/chat/completions/render give
// exactly the ids the generation endpoints send the engine (after the chat
// template; where the tokenizer has none, both refuse chat), and a request
// that asks for endpoint-load-metrics gets vLLM's TEXT or JSON header on its
// non-streamed answer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine_router.h"
#include "http/http_server.h"
#include "load_report.h"
#include "metrics/request_metrics.h"
#include "openai/chat_template.h"
#include "openai_server.h"
#include "sightline/shm_registry/registry.h"
#include "sightline/tokenizer/tokenizer.h"
#include "support/fake_engine.h"
#include "support/http_client.h"
#include "support/scrape.h"

namespace sightline::api {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using sightline::testing::HttpClient;

// One API server over a FakeEngine, with the tokenizer (and the chat
// template of the tokenizer_config.json) in `dir`, or the byte tokenizer.
class RenderServer {
 public:
  explicit RenderServer(const std::string& dir) {
    EXPECT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                          "api-server-0", &registry_)
                    .ok());
    std::string config;
    if (dir.empty()) {
      tokenizer_ = MakeByteTokenizer();
    } else {
      EXPECT_TRUE(LoadHfTokenizer(dir + "/tokenizer.json", &tokenizer_).ok()) << dir;
      std::ifstream in(dir + "/tokenizer_config.json");
      std::stringstream text;
      text << in.rdbuf();
      config = text.str();
    }
    ChatTemplate::Options to;
    to.bos_token = tokenizer_->bos_token();
    to.eos_token = tokenizer_->eos_token();
    std::shared_ptr<const ChatTemplate> chat_template;  // null: a base model's (gpt2)
    EXPECT_TRUE(ResolveChatTemplate("", config, dir.empty(), to, &chat_template).ok());
    has_chat_template_ = chat_template != nullptr;
    sightline::testing::FakeEngine::Options fo;
    fo.input_address = "ipc://@sightline-render-" + registry_->instance() + ".in";
    fo.output_address = "ipc://@sightline-render-" + registry_->instance() + ".out";
    fo.vocab_size = 1 << 20;
    engine_ = std::make_unique<sightline::testing::FakeEngine>(fo);
    EngineClient::Options eo;
    eo.input_address = fo.input_address;
    eo.output_address = fo.output_address;
    EngineRouter::Options ro;
    ro.engines.push_back(eo);
    client_ = std::make_unique<EngineRouter>(std::move(ro));
    EngineInfo info;
    EXPECT_TRUE(client_->Start(&info).ok());
    OpenAiServerOptions so;
    so.served_model_name = "tiny";
    so.engine = info;
    so.chat_template = chat_template;
    so.read_load = [r = registry_.get()](double* kv, double* waiting) {
      ReadLoadReport(r, kv, waiting);
    };
    EXPECT_TRUE(
        RequestMetrics::Create(registry_.get(), "tiny", info.max_model_len, false, &metrics_).ok());
    openai_ = std::make_unique<OpenAiServer>(so, client_.get(), tokenizer_.get(), metrics_.get());
    HttpServerOptions ho;
    ho.port = 0;
    http_ = std::make_unique<HttpServer>(ho);
    openai_->AddRoutes(http_.get());
    EXPECT_TRUE(http_->Start().ok());
  }
  ~RenderServer() {
    http_->Stop();
    client_->Stop();
  }
  int port() const { return http_->port(); }
  bool has_chat_template() const { return has_chat_template_; }
  metrics::Registry* registry() { return registry_.get(); }
  // The prompts the engine was sent, in any order.
  std::vector<std::vector<std::int32_t>> SentPrompts() const {
    std::vector<std::vector<std::int32_t>> out;
    for (const auto& [id, prompt] : engine_->prompts()) out.push_back(prompt);
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::unique_ptr<metrics::Registry> registry_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<sightline::testing::FakeEngine> engine_;
  std::unique_ptr<EngineRouter> client_;
  std::unique_ptr<RequestMetrics> metrics_;
  std::unique_ptr<OpenAiServer> openai_;
  std::unique_ptr<HttpServer> http_;
  bool has_chat_template_ = false;
};

std::vector<std::string> TokenizerDirs() {
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(SIGHTLINE_TOKENIZER_TESTDATA))
    if (fs::exists(e.path() / "tokenizer.json")) dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

std::vector<std::int32_t> Ids(const json& j) {
  return j.get<std::vector<std::int32_t>>();
}

TEST(RenderEndpoints, GiveTheIdsTheGenerationEndpointsSendTheEngine) {
  const std::vector<std::string> dirs = TokenizerDirs();
  ASSERT_GE(dirs.size(), 5u);
  for (const std::string& dir : dirs) {
    SCOPED_TRACE(dir);
    RenderServer server(dir);
    const json completion = {
        {"model", "tiny"}, {"prompt", {"Hello, world! Ünïcödé and\ttabs", "A second prompt."}},
        {"max_tokens", 3}, {"temperature", 0.5},
        {"seed", 7},       {"cache_salt", "s1"}};
    auto r = HttpClient(server.port()).Post("/v1/completions/render", completion.dump());
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const json rendered = json::parse(r.body());
    ASSERT_TRUE(rendered.is_array());
    ASSERT_EQ(rendered.size(), 2u);
    for (const json& g : rendered) {
      for (const char* key :
           {"request_id", "token_ids", "features", "sampling_params", "model", "stream",
            "stream_options", "cache_salt", "priority", "kv_transfer_params"})
        EXPECT_TRUE(g.contains(key)) << key;
      EXPECT_EQ(g["model"], "tiny");
      EXPECT_EQ(g["cache_salt"], "s1");
      EXPECT_EQ(g["sampling_params"]["max_tokens"], 3);
      EXPECT_EQ(g["sampling_params"]["seed"], 7);
    }
    r = HttpClient(server.port()).Post("/v1/completions", completion.dump());
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const json usage = json::parse(r.body())["usage"];
    std::vector<std::vector<std::int32_t>> want = {Ids(rendered[0]["token_ids"]),
                                                   Ids(rendered[1]["token_ids"])};
    std::sort(want.begin(), want.end());
    EXPECT_EQ(server.SentPrompts(), want);
    EXPECT_EQ(usage["prompt_tokens"], want[0].size() + want[1].size());

    const std::vector<std::vector<std::int32_t>> before = server.SentPrompts();
    const json chat = {{"model", "tiny"},
                       {"messages",
                        {{{"role", "system"}, {"content", "Be brief."}},
                         {{"role", "user"}, {"content", "What is 2 + 2? Ünïcödé."}}}},
                       {"max_tokens", 2}};
    if (!server.has_chat_template()) {  // a base model: chat refused, nothing sent
      for (const char* path : {"/v1/chat/completions/render", "/v1/chat/completions"}) {
        r = HttpClient(server.port()).Post(path, chat.dump());
        EXPECT_EQ(r.result_int(), 400) << path;
        EXPECT_EQ(json::parse(r.body())["error"]["message"], NoChatTemplateMessage());
      }
      EXPECT_EQ(server.SentPrompts(), before);
      continue;
    }
    r = HttpClient(server.port()).Post("/v1/chat/completions/render", chat.dump());
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const json one = json::parse(r.body());
    ASSERT_TRUE(one.is_object());
    r = HttpClient(server.port()).Post("/v1/chat/completions", chat.dump());
    ASSERT_EQ(r.result_int(), 200) << r.body();
    const std::vector<std::vector<std::int32_t>> after = server.SentPrompts();
    std::vector<std::vector<std::int32_t>> sent;
    std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                        std::back_inserter(sent));
    EXPECT_EQ(sent, std::vector<std::vector<std::int32_t>>{Ids(one["token_ids"])});
    EXPECT_EQ(json::parse(r.body())["usage"]["prompt_tokens"], one["token_ids"].size());
  }
}

TEST(RenderEndpoints, RefuseWhatTheGenerationEndpointsRefuse) {
  RenderServer server("");
  auto r = HttpClient(server.port())
               .Post("/v1/completions/render", json{{"model", "other"}, {"prompt", "x"}}.dump());
  EXPECT_EQ(r.result_int(), 404);
  EXPECT_EQ(json::parse(r.body())["error"]["type"], "NotFoundError");
  r = HttpClient(server.port()).Post("/v1/chat/completions/render", json{{"messages", 3}}.dump());
  EXPECT_EQ(r.result_int(), 400);
  r = HttpClient(server.port()).Post("/v1/completions/render", "{not json");
  EXPECT_EQ(r.result_int(), 400);
}

TEST(LoadReport, NonStreamedAnswersCarryVllmsHeaderWhenAsked) {
  RenderServer server("");
  // The engine's two gauges as an engine would write them.
  metrics::GaugeFamily kv, waiting;
  ASSERT_TRUE(server.registry()
                  ->AddGauge("vllm:kv_cache_usage_perc", "KV-cache usage.",
                             metrics::GaugeMode::kLiveMostRecent, {"engine", "model_name"}, &kv)
                  .ok());
  ASSERT_TRUE(server.registry()
                  ->AddGauge("vllm:num_requests_waiting", "Waiting.",
                             metrics::GaugeMode::kLiveMostRecent, {"engine", "model_name"},
                             &waiting)
                  .ok());
  kv.With({{"engine", "0"}, {"model_name", "tiny"}}).Set(0.42);
  waiting.With({{"engine", "0"}, {"model_name", "tiny"}}).Set(5);
  auto ask = [&](const std::string& path, const json& body, const std::string& format) {
    std::map<std::string, std::string> fields = {{"Content-Type", "application/json"}};
    if (!format.empty()) fields["endpoint-load-metrics-format"] = format;
    return HttpClient(server.port()).Request("POST", path, fields, body.dump());
  };
  const json completion = {{"prompt", "hi"}, {"max_tokens", 2}};
  auto r = ask("/v1/completions", completion, "TEXT");
  ASSERT_EQ(r.result_int(), 200);
  EXPECT_EQ(r["endpoint-load-metrics"],
            "TEXT named_metrics.kv_cache_usage_perc=0.42, named_metrics.num_requests_waiting=5.0");
  r = ask("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}, "json");
  ASSERT_EQ(r.result_int(), 200);
  EXPECT_EQ(r["endpoint-load-metrics"],
            "JSON {\"named_metrics\": {\"kv_cache_usage_perc\": 0.42, \"num_requests_waiting\": "
            "5.0}}");
  for (const std::string& format : {std::string(), std::string("xml")}) {
    r = ask("/v1/completions", completion, format);
    EXPECT_EQ(r.result_int(), 200);
    EXPECT_EQ(r["endpoint-load-metrics"], "") << format;
  }
  json stream = completion;
  stream["stream"] = true;
  r = ask("/v1/completions", stream, "TEXT");
  EXPECT_EQ(r.result_int(), 200);
  EXPECT_EQ(r["endpoint-load-metrics"], "") << "streams get none, as in vLLM";
}

TEST(LoadReport, FloatsAsPythonPrintsThem) {
  EXPECT_EQ(PythonFloat(5), "5.0");
  EXPECT_EQ(PythonFloat(0.42), "0.42");
  EXPECT_EQ(PythonFloat(0), "0.0");
  EXPECT_EQ(PythonFloat(1e-05), "1e-05");
  EXPECT_EQ(PythonFloat(0.1 + 0.2), "0.30000000000000004");
}

}  // namespace
}  // namespace sightline::api
