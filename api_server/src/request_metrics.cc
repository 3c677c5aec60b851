#include "sightline/api_server/request_metrics.h"

#include "sightline/shm_registry/catalogue.h"

namespace sightline::api {

Status RequestMetrics::Create(metrics::Registry* r, const std::string& model_name,
                              std::uint32_t max_model_len, bool disable_log_stats,
                              std::unique_ptr<RequestMetrics>* out) {
  std::unique_ptr<RequestMetrics> m(new RequestMetrics());
  m->enabled_ = !disable_log_stats;
  m->model_name_ = model_name;
  metrics::CatalogueOptions o;
  o.model_name = model_name;
  o.max_model_len = max_model_len;
  const metrics::Labels base = {{"engine", "0"}, {"model_name", model_name}};
  Status s;
  // Every catalogue family is registered the same way by every process; this
  // takes the handles this process writes.
  for (const metrics::CatalogueFamily& f : metrics::Catalogue(o)) {
    const bool http = f.name.starts_with("http_");
    if (!http && disable_log_stats) continue;
    auto series = [&](const char* extra_name = nullptr, const char* extra_value = nullptr) {
      metrics::Labels l = base;
      if (extra_name) l.emplace_back(extra_name, extra_value);
      return l;
    };
    auto counter = [&](metrics::Counter* c, const metrics::Labels& l) {
      metrics::CounterFamily fam;
      s = r->AddCounter(f.name, f.help, f.label_names, &fam);
      if (s.ok()) s = fam.Get(l, c);
    };
    auto histogram = [&](metrics::Histogram* h) {
      metrics::HistogramFamily fam;
      s = r->AddHistogram(f.name, f.help, f.label_names, f.buckets, &fam);
      if (s.ok()) s = fam.Get(base, h);
    };
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
    } else if (n == "prompt_tokens")
      counter(&m->prompt_, base);
    else if (n == "prompt_tokens_by_source") {
      counter(&m->prompt_compute_, series("source", "local_compute"));
      if (s.ok()) counter(&m->prompt_cache_hit_, series("source", "local_cache_hit"));
    } else if (n == "prompt_tokens_cached")
      counter(&m->cached_, base);
    else if (n == "generation_tokens")
      counter(&m->generation_, base);
    else if (n == "request_success")
      s = r->AddCounter(f.name, f.help, f.label_names, &m->success_);
    else if (n == "request_prompt_tokens")
      histogram(&m->req_prompt_);
    else if (n == "request_generation_tokens")
      histogram(&m->req_generation_);
    else if (n == "request_max_num_generation_tokens")
      histogram(&m->max_generation_);
    else if (n == "request_params_n")
      histogram(&m->params_n_);
    else if (n == "request_params_max_tokens")
      histogram(&m->params_max_tokens_);
    else if (n == "request_prefill_kv_computed_tokens")
      histogram(&m->prefill_kv_);
    else if (n == "time_to_first_token_seconds")
      histogram(&m->ttft_);
    else if (n == "inter_token_latency_seconds")
      histogram(&m->itl_);
    else if (n == "request_time_per_output_token_seconds")
      histogram(&m->tpot_);
    else if (n == "e2e_request_latency_seconds")
      histogram(&m->e2e_);
    else if (n == "request_queue_time_seconds")
      histogram(&m->queue_);
    else if (n == "request_prefill_time_seconds")
      histogram(&m->prefill_);
    else if (n == "request_decode_time_seconds")
      histogram(&m->decode_);
    else if (n == "request_inference_time_seconds")
      histogram(&m->inference_);
    if (!s.ok()) return s;
  }
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

void RequestMetrics::OnStreamOutcome(const std::string& handler, const char* outcome) {
  stream_outcomes_.With({{"handler", handler}, {"outcome", outcome}}).Inc();
}

void RequestMetrics::OnFirstOutput(std::uint32_t prompt_tokens, std::uint32_t cached_tokens) {
  if (!enabled_) return;
  prompt_.Inc(prompt_tokens);
  prompt_compute_.Inc(prompt_tokens - cached_tokens);
  prompt_cache_hit_.Inc(cached_tokens);
  cached_.Inc(cached_tokens);
}

void RequestMetrics::OnTokens(std::uint32_t count, double itl_seconds) {
  if (!enabled_) return;
  generation_.Inc(count);
  if (itl_seconds >= 0) itl_.Observe(itl_seconds);
}

void RequestMetrics::OnTimeToFirstToken(double seconds) {
  if (enabled_) ttft_.Observe(seconds);
}

void RequestMetrics::OnFinished(const FinishedRequest& r) {
  if (!enabled_) return;
  success_
      .With({{"engine", "0"}, {"finished_reason", r.finished_reason}, {"model_name", model_name_}})
      .Inc();
  req_prompt_.Observe(r.prompt_tokens);
  req_generation_.Observe(r.generation_tokens);
  if (r.max_tokens_set) params_max_tokens_.Observe(r.max_tokens);
  prefill_kv_.Observe(r.prompt_tokens - r.cached_tokens);
  if (r.last_output >= 0) e2e_.Observe(r.last_output - r.arrival);
  if (r.queued >= 0 && r.first_scheduled >= 0) queue_.Observe(r.first_scheduled - r.queued);
  if (r.first_scheduled >= 0 && r.engine_first_token >= 0)
    prefill_.Observe(r.engine_first_token - r.first_scheduled);
  if (r.engine_first_token >= 0 && r.engine_last_token >= 0) {
    const double decode = r.engine_last_token - r.engine_first_token;
    decode_.Observe(decode);
    tpot_.Observe(r.generation_tokens > 1 ? decode / (r.generation_tokens - 1) : 0.0);
  }
  if (r.first_scheduled >= 0 && r.engine_last_token >= 0)
    inference_.Observe(r.engine_last_token - r.first_scheduled);
}

void RequestMetrics::OnParentFinished(std::uint32_t n, std::uint32_t max_generation_tokens) {
  if (!enabled_) return;
  params_n_.Observe(n);
  max_generation_.Observe(max_generation_tokens);
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
