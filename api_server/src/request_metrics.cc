#include "sightline/api_server/request_metrics.h"

#include "sightline/shm_registry/catalogue.h"

namespace sightline::api {

struct RequestMetrics::Engine {
  metrics::Counter prompt, prompt_compute, prompt_cache_hit, cached, generation;
  metrics::Histogram req_prompt, req_generation, max_generation, params_n, params_max_tokens,
      prefill_kv, ttft, itl, tpot, e2e, queue, prefill, decode, inference;
  std::string label;  // the `engine` label value
};

namespace {

// The catalogue's request-scoped families this process writes, by the name
// after "vllm:", and where each engine keeps its series.
using Engine = RequestMetrics::Engine;
const std::pair<const char*, metrics::Counter Engine::*> kCounters[] = {
    {"prompt_tokens", &Engine::prompt},
    {"prompt_tokens_cached", &Engine::cached},
    {"generation_tokens", &Engine::generation}};
const std::pair<const char*, metrics::Histogram Engine::*> kHistograms[] = {
    {"request_prompt_tokens", &Engine::req_prompt},
    {"request_generation_tokens", &Engine::req_generation},
    {"request_max_num_generation_tokens", &Engine::max_generation},
    {"request_params_n", &Engine::params_n},
    {"request_params_max_tokens", &Engine::params_max_tokens},
    {"request_prefill_kv_computed_tokens", &Engine::prefill_kv},
    {"time_to_first_token_seconds", &Engine::ttft},
    {"inter_token_latency_seconds", &Engine::itl},
    {"request_time_per_output_token_seconds", &Engine::tpot},
    {"e2e_request_latency_seconds", &Engine::e2e},
    {"request_queue_time_seconds", &Engine::queue},
    {"request_prefill_time_seconds", &Engine::prefill},
    {"request_decode_time_seconds", &Engine::decode},
    {"request_inference_time_seconds", &Engine::inference}};

}  // namespace

RequestMetrics::RequestMetrics() = default;
RequestMetrics::~RequestMetrics() = default;

Status RequestMetrics::Create(metrics::Registry* r, const std::string& model_name,
                              std::uint32_t max_model_len, bool disable_log_stats,
                              std::unique_ptr<RequestMetrics>* out) {
  std::unique_ptr<RequestMetrics> m(new RequestMetrics());
  m->enabled_ = !disable_log_stats;
  m->model_name_ = model_name;
  metrics::CatalogueOptions o;
  o.model_name = model_name;
  o.max_model_len = max_model_len;
  Status s;
  // Every catalogue family is registered the same way by every process; this
  // takes the families this process writes.
  for (const metrics::CatalogueFamily& f : metrics::Catalogue(o)) {
    const bool http = f.name.starts_with("http_");
    if (!http && disable_log_stats) continue;
    const std::string n = f.name.substr(f.name.find(':') + 1);
    if (f.name == "http_requests_total")
      s = r->AddCounter(f.name, f.help, f.label_names, &m->http_requests_);
    else if (f.name == "http_request_size_bytes")
      s = r->AddSummary(f.name, f.help, f.label_names, &m->http_request_size_);
    else if (f.name == "http_response_size_bytes")
      s = r->AddSummary(f.name, f.help, f.label_names, &m->http_response_size_);
    else if (f.name == "http_request_duration_seconds")
      s = r->AddHistogram(f.name, f.help, f.label_names, f.buckets, &m->http_duration_);
    else if (f.name == "http_request_duration_highr_seconds") {
      metrics::HistogramFamily fam;
      s = r->AddHistogram(f.name, f.help, f.label_names, f.buckets, &fam);
      if (s.ok()) s = fam.Get({}, &m->http_highr_);
    } else if (n == "prompt_tokens_by_source")
      s = r->AddCounter(f.name, f.help, f.label_names, &m->prompt_by_source_);
    else if (n == "request_success")
      s = r->AddCounter(f.name, f.help, f.label_names, &m->success_);
    for (const auto& [name, member] : kCounters)
      if (s.ok() && n == name) {
        m->counters_.emplace_back(metrics::CounterFamily{}, member);
        s = r->AddCounter(f.name, f.help, f.label_names, &m->counters_.back().first);
      }
    for (const auto& [name, member] : kHistograms)
      if (s.ok() && n == name) {
        m->histograms_.emplace_back(metrics::HistogramFamily{}, member);
        s = r->AddHistogram(f.name, f.help, f.label_names, f.buckets, &m->histograms_.back().first);
      }
    if (!s.ok()) return s;
  }
  if (!disable_log_stats && (s = m->MakeEngine(0, &m->engine0_), !s.ok())) return s;
  // METRICS.md §7, beyond vLLM: a 200 does not mean a stream was delivered.
  // Like the HTTP families it stays with --disable-log-stats. Every series
  // exists from start-up, so rate() sees the first outcome of each kind.
  s = r->AddCounter(
      "sightline:stream_outcomes_total",
      "Streamed responses by how they ended: completed (final chunk and [DONE] "
      "written), client_disconnected, error_after_headers (an error event, no [DONE]).",
      {"handler", "outcome"}, &m->stream_outcomes_);
  for (const char* handler : {"/v1/completions", "/v1/chat/completions", "/v1/responses"})
    for (const char* outcome : {"completed", "client_disconnected", "error_after_headers"})
      if (s.ok())
        s = m->stream_outcomes_.Get({{"handler", handler}, {"outcome", outcome}}, nullptr);
  if (!s.ok()) return s;
  *out = std::move(m);
  return Status::Ok();
}

Status RequestMetrics::MakeEngine(std::uint32_t index, std::unique_ptr<Engine>* out) const {
  auto e = std::make_unique<Engine>();
  e->label = std::to_string(index);
  const metrics::Labels base = {{"engine", e->label}, {"model_name", model_name_}};
  Status s;
  for (const auto& [family, member] : counters_)
    if (s.ok()) s = family.Get(base, &((*e).*member));
  for (const auto& [family, member] : histograms_)
    if (s.ok()) s = family.Get(base, &((*e).*member));
  auto source = [&](const char* value, metrics::Counter* c) {
    metrics::Labels l = base;
    l.emplace_back("source", value);
    if (s.ok()) s = prompt_by_source_.Get(l, c);
  };
  source("local_compute", &e->prompt_compute);
  source("local_cache_hit", &e->prompt_cache_hit);
  *out = std::move(e);  // on failure, handles that drop updates (counted as overflow)
  return s;
}

RequestMetrics::Engine& RequestMetrics::For(std::uint32_t engine) {
  if (engine == 0) return *engine0_;
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Engine>& e = others_[engine];
  if (!e) (void)MakeEngine(engine, &e);
  return *e;
}

void RequestMetrics::OnStreamOutcome(const std::string& handler, const char* outcome) {
  stream_outcomes_.With({{"handler", handler}, {"outcome", outcome}}).Inc();
}

void RequestMetrics::OnFirstOutput(std::uint32_t engine, std::uint32_t prompt_tokens,
                                   std::uint32_t cached_tokens) {
  if (!enabled_) return;
  Engine& e = For(engine);
  e.prompt.Inc(prompt_tokens);
  e.prompt_compute.Inc(prompt_tokens - cached_tokens);
  e.prompt_cache_hit.Inc(cached_tokens);
  e.cached.Inc(cached_tokens);
}

void RequestMetrics::OnTokens(std::uint32_t engine, std::uint32_t count, double itl_seconds) {
  if (!enabled_) return;
  Engine& e = For(engine);
  e.generation.Inc(count);
  if (itl_seconds >= 0) e.itl.Observe(itl_seconds);
}

void RequestMetrics::OnTimeToFirstToken(std::uint32_t engine, double seconds) {
  if (enabled_) For(engine).ttft.Observe(seconds);
}

void RequestMetrics::OnFinished(const FinishedRequest& r) {
  if (!enabled_) return;
  Engine& e = For(r.engine);
  success_
      .With({{"engine", e.label},
             {"finished_reason", r.finished_reason},
             {"model_name", model_name_}})
      .Inc();
  e.req_prompt.Observe(r.prompt_tokens);
  e.req_generation.Observe(r.generation_tokens);
  if (r.max_tokens_set) e.params_max_tokens.Observe(r.max_tokens);
  e.prefill_kv.Observe(r.prompt_tokens - r.cached_tokens);
  if (r.last_output >= 0) e.e2e.Observe(r.last_output - r.arrival);
  if (r.queued >= 0 && r.first_scheduled >= 0) e.queue.Observe(r.first_scheduled - r.queued);
  if (r.first_scheduled >= 0 && r.engine_first_token >= 0)
    e.prefill.Observe(r.engine_first_token - r.first_scheduled);
  if (r.engine_first_token >= 0 && r.engine_last_token >= 0) {
    const double decode = r.engine_last_token - r.engine_first_token;
    e.decode.Observe(decode);
    e.tpot.Observe(r.generation_tokens > 1 ? decode / (r.generation_tokens - 1) : 0.0);
  }
  if (r.first_scheduled >= 0 && r.engine_last_token >= 0)
    e.inference.Observe(r.engine_last_token - r.first_scheduled);
}

void RequestMetrics::OnParentFinished(std::uint32_t engine, std::uint32_t n,
                                      std::uint32_t max_generation_tokens) {
  if (!enabled_) return;
  Engine& e = For(engine);
  e.params_n.Observe(n);
  e.max_generation.Observe(max_generation_tokens);
}

void RequestMetrics::OnHttp(const HttpExchange& e) {
  const std::string handler(e.handler), method(e.method);
  const std::string status_class = std::to_string(e.status / 100) + "xx";
  http_requests_.With({{"handler", handler}, {"method", method}, {"status", status_class}}).Inc();
  http_request_size_.With({{"handler", handler}}).Observe(static_cast<double>(e.request_bytes));
  http_response_size_.With({{"handler", handler}}).Observe(static_cast<double>(e.response_bytes));
  http_highr_.Observe(e.seconds);
  http_duration_.With({{"handler", handler}, {"method", method}}).Observe(e.seconds);
}

}  // namespace sightline::api
