// LiveApiServer tests: a real engine process and a real API-server process
// sharing a registry, driven over HTTP (CompletionsTest), plus small helpers.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "sightline/shm_registry/registry.h"
#include "support/child_process.h"
#include "support/http_client.h"
#include "support/loopback.h"
#include "support/scrape.h"

namespace sightline::api {

using nlohmann::json;
using sightline::testing::ChildProcess;
using sightline::testing::HttpClient;
using sightline::testing::ParseSamples;

class CompletionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(metrics::Registry::Create(sightline::testing::UniqueInstance(), metrics::Capacity{},
                                          "supervisor", &reg_)
                    .ok());
    base_ = "/tmp/" + reg_->instance();
    const std::string in = "ipc://" + base_ + ".in", out = "ipc://" + base_ + ".out";
    std::vector<std::string> engine = {SIGHTLINE_CLI, "engine", "--input", in, "--output", out};
    for (const char* arg : {"--served-model-name", "tiny", "--threads", "1", "--log-stats-interval",
                            "60", "--registry"})
      engine.emplace_back(arg);
    engine.push_back(reg_->instance());
    engine.insert(engine.end(), extra_engine_args_.begin(), extra_engine_args_.end());
    engine_ = ChildProcess::Exec(engine);
    // The listening socket a supervisor would make, inherited by the API server.
    const int fd = sightline::testing::ListenLoopback(&port_);
    ASSERT_GE(fd, 0);
    std::vector<std::string> api = {
        SIGHTLINE_CLI, "api-server", "--engine-input", in,     "--engine-output",
        out,           "--registry", reg_->instance(), "--fd", std::to_string(fd)};
    api.insert(api.end(), extra_api_args_.begin(), extra_api_args_.end());
    api_ = ChildProcess::Exec(api);
    close(fd);
    for (int i = 0; i < 100; ++i) {  // up within 10 s
      try {
        if (HttpClient(port_).Request("GET", "/health").result_int() == 200) return;
      } catch (const std::exception&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << "the API server did not come up";
  }
  void TearDown() override {
    if (api_.pid() > 0) api_.KillAndWait(SIGTERM);
    if (engine_.pid() > 0) engine_.KillAndWait(SIGTERM);
    std::filesystem::remove(base_ + ".in");
    std::filesystem::remove(base_ + ".out");
  }
  json Complete(json body) {
    body["model"] = "tiny";
    auto r = HttpClient(port_).Post("/v1/completions", body.dump());
    EXPECT_EQ(r.result_int(), 200) << r.body();
    return json::parse(r.body());
  }
  std::map<std::string, double> Page() {
    return ParseSamples(reg_->Render(metrics::ExpositionFormat::kPrometheusText));
  }
  static std::string Key(const std::string& name, const std::string& extra = "") {
    return name + "{engine=\"0\"," + extra + "model_name=\"tiny\"}";
  }
  std::unique_ptr<metrics::Registry> reg_;
  std::string base_;
  int port_ = 0;
  std::vector<std::string> extra_api_args_, extra_engine_args_;
  ChildProcess engine_, api_;
};

inline const json kGreedy = {
    {"prompt", "Hello, Sightline"}, {"max_tokens", 8}, {"temperature", 0}, {"ignore_eos", true}};

// The `data:` payloads of a server-sent event stream, in order.
inline std::vector<std::string> SseEvents(const std::string& body) {
  std::vector<std::string> events;
  for (std::size_t at = 0; (at = body.find("data: ", at)) != std::string::npos;) {
    const std::size_t end = body.find("\n\n", at);
    events.push_back(body.substr(at + 6, end - at - 6));
    at = end;
  }
  return events;
}

}  // namespace sightline::api
