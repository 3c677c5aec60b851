// LoRA through `sightline serve` (issue 41): adapters from --lora-modules
// (both of vLLM's spellings) selected by the request's `model` on any of two
// API servers, listed by /v1/models with their parent and root, an unknown
// name a 404 with vLLM's error body, the metrics under the base model's
// name; and an adapter the runner cannot run refused at start by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

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

}  // namespace
}  // namespace sightline::testing
