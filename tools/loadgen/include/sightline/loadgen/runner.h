// Runner: sends a workload to an OpenAI-compatible server, streaming every
// request, and measures what the client sees (TTFT, every inter-token gap,
// end to end, tokens from the final usage chunk).
//
// One thread drives every request with Asio coroutines on Beast streams, so
// timestamps are taken as bytes arrive, not when a worker gets around to
// them. Arrivals follow the schedule (Poisson or all at once); with
// max_concurrency > 0, a request that arrives while that many are in flight
// waits for a slot (and its clock starts when it is sent, as in vLLM's
// benchmark). A request goes on a connection an earlier one left open when
// there is one (keep_alive). Bounded: max_duration_s stops sending and cancels what is in
// flight; every request has request_timeout_s.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sightline/loadgen/stats.h"
#include "sightline/loadgen/workload.h"
#include "sightline/status.h"

namespace sightline::loadgen {

struct Target {
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // empty: the server's first model
  std::string api_key;
};

// http://HOST[:PORT] (no path, no TLS) into host and port.
Status ParseBaseUrl(const std::string& url, Target* target);

// One blocking GET (for /metrics and /v1/models); non-2xx is an error.
Status HttpGet(const Target& target, const std::string& path, std::string* body,
               double timeout_s = 30);

struct RunOptions {
  Target target;
  bool ignore_eos = false;
  double temperature = 0;  // every request's; 0: greedy
  double request_rate = std::numeric_limits<double>::infinity();
  std::size_t max_concurrency = 0;  // 0: no limit
  double max_duration_s = 600;
  double request_timeout_s = 600;
  std::uint64_t seed = 0;
  // Requests reuse the connections the server keeps (HTTP/1.1 keep-alive),
  // as vLLM's benchmark does (one aiohttp session for the run); false: a new
  // connection per request.
  bool keep_alive = true;
  // Called about every progress_interval_s from the run's thread.
  std::function<void(std::size_t done, std::size_t total, double elapsed_s)> progress;
  double progress_interval_s = 1;
};

struct RunOutput {
  std::vector<RequestResult> results;  // in workload order; unsent ones are absent
  std::size_t not_sent = 0;            // left when max_duration_s ran out
  double duration_s = 0;
};

RunOutput Run(const RunOptions& options, const std::vector<BenchRequest>& workload);

// The JSON body sent for one request (exposed for tests).
std::string RequestBody(const RunOptions& options, const BenchRequest& request);

}  // namespace sightline::loadgen
