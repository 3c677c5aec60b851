// --metrics-buckets end to end: strict flag checks (one line, exit 1, nothing
// started), and live instances whose engine-written and API-server-written
// histograms show exactly the chosen bounds, in every process, however the
// instance was started (`serve`, or an engine and API servers on their own).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <thread>

#include "e2e/load.h"
#include "e2e/serve_instance.h"
#include "support/loopback.h"

namespace sightline::testing {
namespace {

using namespace std::chrono_literals;

const std::vector<std::string> kTtft = {"--metrics-buckets",
                                        "time_to_first_token_seconds=0.05,0.1,0.2"};

// The `le` values of one series of a histogram family, in page order: the
// series' labels sorted before `le` end `before_le`, those after it start
// `after_le`.
std::vector<std::string> LeValues(const std::string& page, const std::string& family,
                                  const std::string& before_le, const std::string& after_le) {
  std::vector<std::string> out;
  const std::string head = family + "_bucket{" + before_le + "le=\"";
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(head)) continue;
    const std::size_t end = line.find('"', head.size());
    if (end == std::string::npos || line.compare(end, after_le.size() + 2, "\"," + after_le) != 0)
      continue;
    out.push_back(line.substr(head.size(), end - head.size()));
  }
  return out;
}

std::string Page(int port) {
  return HttpClient(port).Request("GET", "/metrics").body();
}

struct CliRun {
  int rc;
  std::string output;
};
CliRun Cli(const std::string& args) {
  FILE* p = popen((std::string(SIGHTLINE_CLI) + " " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  return {WEXITSTATUS(pclose(p)), out};
}

TEST(MetricsBuckets, EachBadValueIsAOneLineErrorAndExit1) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"time_to_first_token_seconds", "expected FAMILY=b1,b2,..."},
      {"no_such_family=1", "is not a histogram family"},
      {"vllm:time_to_first_token_seconds=1", "without its prefix"},
      {"time_to_first_token_seconds=", "no bounds"},
      {"time_to_first_token_seconds=1,x", "'x' is not a number"},
      {"time_to_first_token_seconds=1,inf", "is not finite"},
      {"time_to_first_token_seconds=0.2,0.1", "strictly ascending"},
      {"time_to_first_token_seconds=1,1", "strictly ascending"},
      {"time_to_first_token_seconds=1,1e400", "'1e400' is out of range"},
      {"time_to_first_token_seconds=+-1,2", "'+-1' is not a number"},
      {"kv_block_lifetime_seconds=1,2", "needs --kv-cache-metrics"},
      {"request_queue_time_seconds=-1,0", "'-1' is negative"},
  };
  for (const auto& [value, why] : bad)
    for (const std::string cmd :
         {"serve --dry-run", "engine --dry-run --input ipc:///tmp/i --output ipc:///tmp/o"}) {
      const CliRun r = Cli(cmd + " --metrics-buckets '" + value + "'");
      EXPECT_EQ(r.rc, 1) << cmd << " " << value;
      EXPECT_EQ(r.output.rfind("sightline: error: ", 0), 0u) << r.output;
      EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    }
  const CliRun twice =
      Cli("serve --dry-run --metrics-buckets request_params_n=1,2 --metrics-buckets "
          "request_params_n=3");
  EXPECT_EQ(twice.rc, 1);
  EXPECT_NE(twice.output.find("given more than once"), std::string::npos) << twice.output;
  // At most 100 bounds: each is a cell per series in every process.
  std::string many = "request_params_n=";
  for (int i = 1; i <= 101; ++i) many += std::to_string(i) + (i < 101 ? "," : "");
  const CliRun too_many = Cli("serve --dry-run --metrics-buckets " + many);
  EXPECT_EQ(too_many.rc, 1);
  EXPECT_NE(too_many.output.find("101 bounds; at most 100"), std::string::npos) << too_many.output;
  // A family that would not exist: only the HTTP ones do under --disable-log-stats.
  const CliRun no_stats =
      Cli("serve --dry-run --disable-log-stats --metrics-buckets request_params_n=1,2");
  EXPECT_EQ(no_stats.rc, 1);
  EXPECT_NE(no_stats.output.find("registers no vllm: family"), std::string::npos)
      << no_stats.output;
  // Good values pass the dry run; so does one the flag is repeated for.
  EXPECT_EQ(Cli("serve --dry-run --metrics-buckets request_params_n=1,+2 --metrics-buckets "
                "http_request_duration_seconds=0.01,0.1,1e3")
                .rc,
            0);
  EXPECT_EQ(Cli("serve --dry-run --disable-log-stats --metrics-buckets "
                "http_request_duration_seconds=0.01,0.1")
                .rc,
            0);
  EXPECT_EQ(Cli("serve --dry-run --kv-cache-metrics --metrics-buckets "
                "kv_block_lifetime_seconds=1,10")
                .rc,
            0);

  // A real start refuses it before anything exists.
  ServeInstance serve({"--metrics-buckets", "time_to_first_token_seconds=2,1"});
  EXPECT_EQ(serve.WaitExit(10), std::optional<int>(1));
  const std::string log = serve.Log();
  EXPECT_EQ(log.rfind("sightline: error: ", 0), 0u) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_FALSE(SegmentExists(serve.registry()));
}

// The supervisor registers the bounds before its children start; the engine
// (iteration_tokens_total) and both API servers (TTFT, HTTP latency) record
// into them, and the families left alone keep vLLM's bounds.
TEST(MetricsBuckets, EveryProcessOfAServeInstanceUsesTheChosenBounds) {
  std::vector<std::string> args = {"--api-server-count", "2"};
  args.insert(args.end(), kTtft.begin(), kTtft.end());
  for (const char* more :
       {"iteration_tokens_total=3,7,100", "http_request_duration_seconds=0.25,4"}) {
    args.push_back("--metrics-buckets");
    args.push_back(more);
  }
  ServeInstance serve(args);
  ASSERT_GT(serve.port(), 0) << serve.Log();
  // A new connection per request: SO_REUSEPORT spreads them over both API
  // servers (all 24 on one has probability 2^-23).
  constexpr int kRequests = 24;
  for (int i = 0; i < kRequests; ++i)
    ASSERT_TRUE(Complete(serve.port(), 16, 4, i % 2 == 0).ok) << i;
  ASSERT_TRUE(WaitForPage(serve.port(), [](auto p) {
    return p[Key("vllm:time_to_first_token_seconds_count")] == kRequests;
  }));
  const std::string page = Page(serve.port());
  const std::string model = "model_name=\"sightline-tiny\"";
  EXPECT_EQ(LeValues(page, "vllm:time_to_first_token_seconds", "engine=\"0\",", model),
            (std::vector<std::string>{"0.05", "0.1", "0.2", "+Inf"}))
      << page;
  EXPECT_EQ(LeValues(page, "vllm:iteration_tokens_total", "engine=\"0\",", model),
            (std::vector<std::string>{"3.0", "7.0", "100.0", "+Inf"}));
  EXPECT_EQ(LeValues(page, "http_request_duration_seconds", "handler=\"/v1/completions\",",
                     "method=\"POST\""),
            (std::vector<std::string>{"0.25", "4.0", "+Inf"}));
  EXPECT_EQ(LeValues(page, "vllm:inter_token_latency_seconds", "engine=\"0\",", model).size(),
            20u);  // vLLM's 19 bounds and +Inf
  const auto p = ParseSamples(page);
  EXPECT_GT(p.at(Key("vllm:iteration_tokens_total_count")), 0);
  EXPECT_EQ(p.at("vllm:iteration_tokens_total_bucket{engine=\"0\",le=\"+Inf\"," + model + "}"),
            p.at(Key("vllm:iteration_tokens_total_count")));
  EXPECT_EQ(p.at("vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"+Inf\"," + model + "}"),
            kRequests);
  EXPECT_EQ(p.at("http_request_duration_seconds_bucket{handler=\"/v1/completions\",le=\"+Inf\","
                 "method=\"POST\"}"),
            kRequests);
}

// Run on its own, the engine creates the registry with its bounds; an API
// server started before it (waiting for the registry) adopts them, and a
// second engine asking for others is refused instead of silently ignored.
TEST(MetricsBuckets, AStandaloneEngineFixesTheBoundsOfItsApiServers) {
  const std::string name = UniqueInstance();
  const std::string in = "ipc:///tmp/" + name + ".in", out = "ipc:///tmp/" + name + ".out";
  int port = 0;
  const int probe = ListenLoopback(&port);
  ASSERT_GE(probe, 0);
  close(probe);
  ChildProcess api =
      ChildProcess::Exec({SIGHTLINE_CLI, "api-server", "--engine-input", in, "--engine-output", out,
                          "--registry", name, "--port", std::to_string(port)});
  ChildProcess engine =
      ChildProcess::Exec({SIGHTLINE_CLI, "engine", "--input", in, "--output", out, "--registry",
                          name, "--threads", "1", kTtft[0], kTtft[1]});
  bool served = false;
  for (int i = 0; i < 150 && !served; ++i) {  // up within 15 s
    try {
      served = Complete(port, 16, 2, false).ok;
    } catch (const std::exception&) {
    }
    if (!served) std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(served);
  const std::string page = Page(port);
  EXPECT_EQ(LeValues(page, "vllm:time_to_first_token_seconds", "engine=\"0\",",
                     "model_name=\"sightline-tiny\""),
            (std::vector<std::string>{"0.05", "0.1", "0.2", "+Inf"}))
      << page;

  const CliRun other = Cli("engine --input ipc:///tmp/" + name + ".in2 --output ipc:///tmp/" +
                           name + ".out2 --registry " + name +
                           " --engine-index 1 --threads 1 --metrics-buckets "
                           "time_to_first_token_seconds=1,2");
  EXPECT_EQ(other.rc, 1) << other.output;
  EXPECT_NE(other.output.find("already has other bounds"), std::string::npos) << other.output;
  EXPECT_EQ(std::count(other.output.begin(), other.output.end(), '\n'), 1) << other.output;

  api.KillAndWait(SIGTERM);
  engine.KillAndWait(SIGTERM);
  for (const char* suffix : {".in", ".out", ".in2", ".out2"})
    std::filesystem::remove("/tmp/" + name + suffix);
  std::filesystem::remove("/dev/shm/sightline." + name);
}

// A standalone engine restarted after a crash makes a new instance: the dead
// run's segment is replaced, never joined, so it cannot impose the dead run's
// bounds on the new one (found in review: the engine attached first and then
// refused its own flag, naming a creator that no longer existed).
TEST(MetricsBuckets, AStandaloneEngineRestartedAfterACrashUsesItsOwnBounds) {
  const std::string name = UniqueInstance();
  const std::string in = "ipc:///tmp/" + name + ".in", out = "ipc:///tmp/" + name + ".out";
  // The bounds of an engine-written histogram on the page of registry
  // `name`, once it has them (15 s). (The request-scoped ones, TTFT's, have
  // series once an API server registers its families.)
  auto bounds_become = [&](const std::vector<std::string>& want) {
    std::vector<std::string> got;
    for (int i = 0; i < 150 && got != want; ++i) {
      const CliRun dump = Cli("metrics dump --registry " + name);
      got = LeValues(dump.output, "vllm:iteration_tokens_total", "engine=\"0\",",
                     "model_name=\"sightline-tiny\"");
      if (got != want) std::this_thread::sleep_for(100ms);
    }
    return got;
  };
  auto start = [&](const std::string& ttft) {
    return ChildProcess::Exec({SIGHTLINE_CLI, "engine", "--input", in, "--output", out,
                               "--registry", name, "--threads", "1", "--metrics-buckets",
                               "iteration_tokens_total=" + ttft});
  };
  ChildProcess first = start("0.05,0.1,0.2");
  EXPECT_EQ(bounds_become({"0.05", "0.1", "0.2", "+Inf"}),
            (std::vector<std::string>{"0.05", "0.1", "0.2", "+Inf"}));
  first.KillAndWait(SIGKILL);  // its segment stays behind, every process in it dead
  ChildProcess second = start("1,2");
  EXPECT_EQ(bounds_become({"1.0", "2.0", "+Inf"}),
            (std::vector<std::string>{"1.0", "2.0", "+Inf"}));
  EXPECT_EQ(second.WaitFor(0), std::nullopt) << "the restarted engine exited";
  if (second.pid() > 0) second.KillAndWait(SIGTERM);
  for (const char* suffix : {".in", ".out"}) std::filesystem::remove("/tmp/" + name + suffix);
  std::filesystem::remove("/dev/shm/sightline." + name);
}

}  // namespace
}  // namespace sightline::testing
