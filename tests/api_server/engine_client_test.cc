// EngineClient against a real `sightline engine` process: READY, outputs
// routed to their handler, aborts, utility calls, and a killed engine failing
// every in-flight request promptly.
#include "sightline/api_server/engine_client.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <mutex>

#include "support/child_process.h"
#include "support/ipc_requests.h"
#include "support/scrape.h"

namespace sightline::api {
namespace {

using sightline::testing::ChildProcess;

constexpr std::uint32_t kClient = 3;

std::vector<std::uint8_t> AddRequest(const std::string& id, const std::vector<std::int32_t>& prompt,
                                     std::uint32_t max_tokens, std::uint32_t client = kClient) {
  return sightline::testing::GreedyAddRequest(id, prompt, max_tokens, client);
}

// Collects one request's tokens and how it ended.
struct Collector {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::int32_t> tokens;
  bool done = false, engine_gone = false;
  ipc::FinishReason reason = ipc::FinishReason::None;
  EngineClient::OutputHandler Handler() {
    return [this](const RequestDelta& d) {
      std::lock_guard<std::mutex> g(mu);
      if (!d.output) {
        engine_gone = done = true;
      } else {
        if (d.output->new_token_ids())
          tokens.insert(tokens.end(), d.output->new_token_ids()->begin(),
                        d.output->new_token_ids()->end());
        reason = d.output->finish_reason();
        done = reason != ipc::FinishReason::None;
      }
      cv.notify_all();
    };
  }
  bool Wait(std::chrono::seconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [&] { return done; });
  }
};

class EngineClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = "/tmp/" + sightline::testing::UniqueInstance();
    std::vector<std::string> args = {SIGHTLINE_CLI,
                                     "engine",
                                     "--input",
                                     "ipc://" + base_ + ".in",
                                     "--output",
                                     "ipc://" + base_ + ".out",
                                     "--disable-log-stats",
                                     "--served-model-name",
                                     "tiny"};
    engine_ = ChildProcess::Exec(args);
    EngineClient::Options o;
    o.input_address = "ipc://" + base_ + ".in";
    o.output_address = "ipc://" + base_ + ".out";
    o.client_index = kClient;
    o.ready_timeout_s = 10;
    o.engine_gone_after_s = 0.5;
    client_ = std::make_unique<EngineClient>(o);
  }
  void TearDown() override {
    client_.reset();
    if (engine_.pid() > 0) engine_.KillAndWait(SIGTERM);
    std::filesystem::remove(base_ + ".in");
    std::filesystem::remove(base_ + ".out");
  }
  std::string base_;
  ChildProcess engine_;
  std::unique_ptr<EngineClient> client_;
};

TEST_F(EngineClientTest, ReadyOutputsAbortsAndUtilities) {
  EngineInfo info;
  ASSERT_TRUE(client_->Start(&info).ok());
  EXPECT_EQ(info.model_name, "tiny");
  EXPECT_EQ(info.vocab_size, 260u);
  EXPECT_EQ(info.max_model_len, 2048u);
  EXPECT_TRUE(client_->alive());

  Collector a, b;
  ASSERT_TRUE(client_->Submit("a", AddRequest("a", {1, 2, 3, 4}, 5), a.Handler()).ok());
  ASSERT_TRUE(client_->Submit("b", AddRequest("b", {9, 8, 7}, 100000), b.Handler()).ok());
  EXPECT_EQ(client_->Submit("a", AddRequest("a", {1}, 1), a.Handler()).code(),
            Status::Code::kAlreadyExists);
  EXPECT_EQ(client_->Submit("c", AddRequest("c", {1}, 1, /*client=*/0), a.Handler()).code(),
            Status::Code::kInvalidArgument);  // outputs would go to another API server
  ASSERT_TRUE(a.Wait());
  EXPECT_EQ(a.tokens.size(), 5u);
  EXPECT_EQ(a.reason, ipc::FinishReason::Length);
  client_->Abort({"b"});  // its handler is dropped at once; the engine frees it

  std::promise<std::string> config;
  client_->Utility(ipc::UtilityKind::GetConfig,
                   [&](bool ok, const std::string& m) { config.set_value(ok ? m : "failed"); });
  auto f = config.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_NE(f.get().find("\"max_model_len\":2048"), std::string::npos);
}

TEST_F(EngineClientTest, AKilledEngineFailsInFlightRequestsPromptly) {
  EngineInfo info;
  ASSERT_TRUE(client_->Start(&info).ok());
  Collector c;
  ASSERT_TRUE(client_->Submit("long", AddRequest("long", {5, 6, 7}, 1900), c.Handler()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const auto t0 = std::chrono::steady_clock::now();
  engine_.KillAndWait(SIGKILL);
  ASSERT_TRUE(c.Wait(std::chrono::seconds(5)));
  EXPECT_TRUE(c.engine_gone);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_FALSE(client_->alive());
  Collector after;
  EXPECT_FALSE(client_->Submit("x", AddRequest("x", {1}, 1), after.Handler()).ok());
}

}  // namespace
}  // namespace sightline::api
