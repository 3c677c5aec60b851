#include "bench_command.h"

#include "cli_error.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "sightline/loadgen/compare.h"
#include "sightline/loadgen/exposition.h"
#include "sightline/loadgen/report.h"
#include "sightline/loadgen/runner.h"
#include "sightline/loadgen/spec_decode.h"
#include "sightline/loadgen/workload.h"

namespace sightline::cli {

namespace {

struct BenchOptions {
  std::string base_url = "http://127.0.0.1:8000", endpoint = "/v1/completions", model, api_key;
  std::string dataset_name = "random", dataset_path, output_json;
  std::size_t num_prompts = 100, max_concurrency = 0;
  std::string request_rate = "inf";
  loadgen::RandomOptions random;
  loadgen::SharedPrefixOptions shared;
  loadgen::CopyOptions copy;
  std::uint32_t sharegpt_output_len = 0;
  bool ignore_eos = false, compare_metrics = false, no_progress = false, no_keep_alive = false;
  double temperature = 0;
  std::uint64_t seed = 0;
  double max_duration = 600, request_timeout = 600;
};

// A bar on a terminal, a plain line every few seconds otherwise (logs, CI).
std::function<void(std::size_t, std::size_t, double)> Progress(bool tty) {
  auto last_line = std::make_shared<double>(-1e9);
  return [tty, last_line](std::size_t done, std::size_t total, double elapsed) {
    if (tty) {
      const int width = 40, filled = total ? static_cast<int>(width * done / total) : width;
      std::fprintf(stderr, "\r[%s%s] %zu/%zu requests, %.1f s", std::string(filled, '#').c_str(),
                   std::string(width - filled, '.').c_str(), done, total, elapsed);
      if (done == total) std::fputc('\n', stderr);
    } else if (elapsed - *last_line >= 5 || done == total) {
      *last_line = elapsed;
      std::fprintf(stderr, "progress: %zu/%zu requests done, %.1f s\n", done, total, elapsed);
    }
    std::fflush(stderr);
  };
}

int RunBench(BenchOptions o) {
  loadgen::RunOptions ro;
  if (Status s = loadgen::ParseBaseUrl(o.base_url, &ro.target); !s.ok()) return Fail(s.message());
  if (o.endpoint != "/v1/completions" && o.endpoint != "/v1/chat/completions")
    return Fail("--endpoint must be /v1/completions or /v1/chat/completions");
  double rate = std::numeric_limits<double>::infinity();
  if (o.request_rate != "inf") {
    char* end = nullptr;
    rate = std::strtod(o.request_rate.c_str(), &end);
    if (end != o.request_rate.c_str() + o.request_rate.size() || !(rate > 0) || std::isinf(rate))
      return Fail("--request-rate must be a positive number of requests/s or inf");
  }
  if (o.num_prompts < 1 || o.num_prompts > 1'000'000)
    return Fail("--num-prompts must be in [1, 1000000]");
  if (!(o.max_duration > 0) || !(o.request_timeout > 0))
    return Fail("--max-duration and --request-timeout must be positive");
  if (o.random.range_ratio < 0 || o.random.range_ratio >= 1)
    return Fail("--random-range-ratio must be in [0, 1)");
  if (o.random.input_len < 1 || o.random.output_len < 1 || o.shared.output_len < 1)
    return Fail("input and output lengths must be at least 1");
  if (Status s = loadgen::CheckCopyOptions(o.copy); !s.ok()) return Fail(s.message());
  if (!(o.temperature >= 0 && o.temperature <= 2)) return Fail("--temperature must be in [0, 2]");

  const bool chat = o.endpoint == "/v1/chat/completions";
  std::vector<loadgen::BenchRequest> workload;
  if (o.dataset_name == "random") {
    o.random.seed = o.seed;
    o.random.text = chat;
    workload = loadgen::RandomWorkload(o.random, o.num_prompts);
  } else if (o.dataset_name == "shared-prefix") {
    o.shared.seed = o.seed;
    o.shared.text = chat;
    workload = loadgen::SharedPrefixWorkload(o.shared, o.num_prompts);
  } else if (o.dataset_name == "copy") {
    o.copy.seed = o.seed;
    o.copy.text = chat;
    workload = loadgen::CopyWorkload(o.copy, o.num_prompts);
  } else if (o.dataset_name == "sharegpt") {
    if (o.dataset_path.empty()) return Fail("--dataset-name sharegpt needs --dataset-path");
    if (Status s = loadgen::LoadShareGpt(o.dataset_path, o.num_prompts, o.sharegpt_output_len,
                                         o.seed, &workload);
        !s.ok())
      return Fail(s.message());
    if (workload.size() < o.num_prompts)
      std::cerr << "WARNING bench: " << o.dataset_path << " has " << workload.size()
                << " usable conversations; sending those\n";
  } else {
    return Fail("--dataset-name must be random, shared-prefix, copy or sharegpt");
  }

  ro.target.endpoint = o.endpoint;
  ro.target.api_key = o.api_key;
  ro.target.model = o.model;
  if (ro.target.model.empty()) {  // the server's first model, as OpenAI clients do
    std::string models;
    if (Status s = loadgen::HttpGet(ro.target, "/v1/models", &models); !s.ok())
      return Fail("cannot list the server's models (" + s.message() + "); pass --model");
    const auto j = nlohmann::json::parse(models, nullptr, false);
    if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
        !j["data"][0].contains("id"))
      return Fail("the server's /v1/models lists no model; pass --model");
    ro.target.model = j["data"][0]["id"].get<std::string>();
  }
  ro.ignore_eos = o.ignore_eos;
  ro.temperature = o.temperature;
  ro.request_rate = rate;
  ro.max_concurrency = o.max_concurrency;
  ro.max_duration_s = o.max_duration;
  ro.request_timeout_s = o.request_timeout;
  ro.seed = o.seed;
  ro.keep_alive = !o.no_keep_alive;
  const bool tty = isatty(STDERR_FILENO);
  if (!o.no_progress) {
    ro.progress = Progress(tty);
    ro.progress_interval_s = tty ? 0.2 : 1;
  }

  // /metrics is scraped around every run, for speculative decoding's
  // counters as well as --compare-metrics. Only the latter needs the page:
  // without it, a server with no (or a foreign) /metrics just gets no
  // speculation section, and a short timeout bounds what that costs.
  std::vector<loadgen::Sample> before, after;
  const double scrape_timeout = o.compare_metrics ? 30 : 5;
  auto scrape = [&](std::vector<loadgen::Sample>* out) {
    std::string page;
    Status s = loadgen::HttpGet(ro.target, "/metrics", &page, scrape_timeout);
    if (s.ok()) s = loadgen::ParseExposition(page, out);
    return s;
  };
  const Status scraped_before = scrape(&before);
  if (o.compare_metrics && !scraped_before.ok())
    return Fail("--compare-metrics: " + scraped_before.message());

  std::cerr << "bench: " << workload.size() << " requests to " << o.base_url << o.endpoint
            << " (model " << ro.target.model << ", " << o.dataset_name << ", rate "
            << o.request_rate << ", max concurrency "
            << (o.max_concurrency ? std::to_string(o.max_concurrency) : "unlimited") << ")\n";
  const loadgen::RunOutput run = loadgen::Run(ro, workload);
  const loadgen::RunStats stats = loadgen::Aggregate(run.results, run.duration_s);
  const Status scraped_after = scraped_before.ok() ? scrape(&after) : scraped_before;
  std::optional<loadgen::SpecDecodeStats> spec;
  if (scraped_after.ok()) spec = loadgen::SpecDecodeDelta(before, after);

  loadgen::RunInfo info{o.base_url,      o.endpoint,   ro.target.model,   o.dataset_name,
                        workload.size(), run.not_sent, o.max_concurrency, rate};
  std::cout << loadgen::FormatReport(info, stats, spec ? &*spec : nullptr);
  std::unique_ptr<loadgen::Comparison> comparison;
  if (o.compare_metrics) {
    if (!scraped_after.ok()) return Fail("--compare-metrics: " + scraped_after.message());
    comparison = std::make_unique<loadgen::Comparison>(
        loadgen::Compare(before, after, run.results, o.endpoint));
    std::cout << loadgen::FormatComparison(*comparison);
  }
  std::cout << std::flush;
  if (!o.output_json.empty()) {
    std::ofstream out(o.output_json);
    out << loadgen::JsonReport(info, stats, comparison.get(), spec ? &*spec : nullptr).dump(2)
        << "\n";
    if (!out) return Fail("cannot write " + o.output_json);
  }
  if (stats.ok == 0) return Fail("no request succeeded");
  if (comparison && !comparison->counts_match)
    return Fail("the server's counts differ from what the client saw (see above)");
  if (comparison && !comparison->intervals_hold)
    return Fail("the server's latency intervals contradict what the client saw (see above)");
  return 0;
}

}  // namespace

void AddBenchCommand(CLI::App& app, int* exit_code) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "serve", "Load an OpenAI-compatible server with streamed requests and report latencies");
  cmd->add_option("--base-url", o->base_url, "http://HOST[:PORT] of the server")
      ->capture_default_str();
  cmd->add_option("--endpoint", o->endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  cmd->add_option("--model", o->model, "Model name (default: the server's first)");
  cmd->add_option("--api-key", o->api_key, "Bearer token")->envname("OPENAI_API_KEY");
  cmd->add_option("--dataset-name", o->dataset_name, "random, shared-prefix, copy or sharegpt")
      ->capture_default_str();
  cmd->add_option("--dataset-path", o->dataset_path, "ShareGPT-format JSON file");
  cmd->add_option("--num-prompts", o->num_prompts, "Requests to send")->capture_default_str();
  cmd->add_option("--random-input-len", o->random.input_len, "Prompt tokens (random)")
      ->capture_default_str();
  cmd->add_option("--random-output-len", o->random.output_len, "max_tokens (random)")
      ->capture_default_str();
  cmd->add_option("--random-range-ratio", o->random.range_ratio,
                  "Lengths uniform in [len*(1-r), len*(1+r)]")
      ->capture_default_str();
  cmd->add_option("--shared-prefix-len", o->shared.prefix_len, "L: tokens shared by a group")
      ->capture_default_str();
  cmd->add_option("--shared-prefix-count", o->shared.prompts_per_prefix,
                  "K: prompts per shared prefix")
      ->capture_default_str();
  cmd->add_option("--shared-prefix-suffix-len", o->shared.suffix_len, "Distinct tokens per prompt")
      ->capture_default_str();
  cmd->add_flag("--shared-prefix-interleave", o->shared.interleave,
                "Send the prompts in a random order (from --seed), not group by group");
  cmd->add_option("--shared-prefix-output-len", o->shared.output_len, "max_tokens (shared-prefix)")
      ->capture_default_str();
  cmd->add_option("--copy-span-len", o->copy.span_len, "Random tokens in the repeated span (copy)")
      ->capture_default_str();
  cmd->add_option("--copy-repeats", o->copy.repeats, "Copies of the span in each prompt (copy)")
      ->capture_default_str();
  cmd->add_option("--copy-output-len", o->copy.output_len, "max_tokens (copy)")
      ->capture_default_str();
  cmd->add_option("--sharegpt-output-len", o->sharegpt_output_len,
                  "max_tokens for ShareGPT (0: the reply's bytes / 4)")
      ->capture_default_str();
  cmd->add_option("--request-rate", o->request_rate, "Requests/s (Poisson arrivals) or inf")
      ->capture_default_str();
  cmd->add_option("--max-concurrency", o->max_concurrency,
                  "Requests in flight at most (0: no limit)")
      ->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Generate max_tokens whatever the model says");
  cmd->add_flag("--no-keep-alive", o->no_keep_alive,
                "A new connection per request (by default requests reuse the connections the "
                "server keeps, as vLLM's benchmark does)");
  cmd->add_option("--temperature", o->temperature, "Every request's temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed for prompts and arrivals")->capture_default_str();
  cmd->add_option("--max-duration", o->max_duration,
                  "Seconds before sending stops and requests in flight are cancelled")
      ->capture_default_str();
  cmd->add_option("--request-timeout", o->request_timeout, "Seconds one request may take")
      ->capture_default_str();
  cmd->add_option("--output-json", o->output_json, "Write the results as JSON to FILE");
  cmd->add_flag("--compare-metrics", o->compare_metrics,
                "Scrape /metrics before and after; compare the server's counts, quantiles and "
                "interval sums with the client's (exit 1 if counts differ or an interval "
                "relation fails)");
  cmd->add_flag("--no-progress", o->no_progress, "No progress output");
  cmd->callback([o, exit_code] { *exit_code = RunBench(*o); });
}

}  // namespace sightline::cli
