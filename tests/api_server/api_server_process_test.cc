// The checks RunApiServerProcess makes before it starts anything (what
// `sightline api-server --dry-run` answers); serving is tested through the
// CLI (api_server_cli_test.cc) and in-process (completions_test.cc).
#include <gtest/gtest.h>

#include "sightline/api_server/api_server_process.h"

namespace sightline::api {
namespace {

TEST(ApiServerProcess, ChecksTheFlagsThenTheRegistry) {
  ApiServerProcessOptions o;
  o.per_request_metrics = o.disable_log_stats = true;
  EXPECT_EQ(CheckApiServerProcess(o).message(),
            "--enable-per-request-metrics needs the stats that --disable-log-stats turns off; use "
            "one or the other");
  o.per_request_metrics = false;
  EXPECT_TRUE(CheckApiOptions(o).ok());
  EXPECT_EQ(CheckApiServerProcess(o).message(),
            "--registry is required (metrics-free serving is not supported yet)");
  o.registry = "sightline-test";
  EXPECT_TRUE(CheckApiServerProcess(o).ok());
  o.tokenizer = "/no/such/tokenizer.json";
  EXPECT_EQ(CheckApiServerProcess(o).code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace sightline::api
