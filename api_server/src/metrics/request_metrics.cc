#include "metrics/request_metrics.h"

#include <algorithm>

#include "sightline/ipc/request_success_family.h"
#include "sightline/shm_registry/family_builder.h"

namespace sightline::api {

struct RequestMetrics::Engine {
  metrics::Counter prompt, prompt_compute, prompt_cache_hit, cached, generation;
  metrics::Histogram req_prompt, req_generation, max_generation, params_n, params_max_tokens,
      prefill_kv, ttft, itl, tpot, e2e, queue, prefill, decode, inference, preemptions;
  metrics::Histogram forward_ms, execute_ms;  // --collect-detailed-traces only
  std::string label;                          // the `engine` label value
};

RequestIntervals IntervalsOf(const FinishedRequest& r) {
  RequestIntervals i;
  // The TTFT histogram is observed at the first token (OnTimeToFirstToken,
  // the same subtraction).
  if (r.first_token >= 0) i.ttft = r.first_token - r.arrival;
  if (r.last_output >= 0) i.e2e = r.last_output - r.arrival;
  if (r.queued >= 0 && r.first_scheduled >= 0) i.queue = r.first_scheduled - r.queued;
  if (r.first_scheduled >= 0 && r.engine_first_token >= 0)
    i.prefill = r.engine_first_token - r.first_scheduled;
  if (r.engine_first_token >= 0 && r.engine_last_token >= 0) {
    i.decode = r.engine_last_token - r.engine_first_token;
    i.tpot = r.generation_tokens > 1 ? *i.decode / (r.generation_tokens - 1) : 0.0;
  }
  if (r.first_scheduled >= 0 && r.engine_last_token >= 0)
    i.inference = r.engine_last_token - r.first_scheduled;
  return i;
}

RequestMetrics::RequestMetrics() = default;
RequestMetrics::~RequestMetrics() = default;

Status RequestMetrics::Create(metrics::Registry* r, const std::string& model_name,
                              std::uint32_t max_model_len, bool disable_log_stats,
                              std::unique_ptr<RequestMetrics>* out,
                              std::span<const std::uint32_t> engines) {
  std::unique_ptr<RequestMetrics> m(new RequestMetrics());
  m->enabled_ = !disable_log_stats;
  m->model_name_ = model_name;
  // The HTTP families and the stream outcomes stay with --disable-log-stats.
  Status s = HttpFamilies::Register(r, &m->http_);
  if (s.ok()) s = m->http_.request_duration_highr_seconds.Get({}, &m->http_highr_);
  if (s.ok() && !disable_log_stats) s = RequestFamilies::Register(r, max_model_len, &m->families_);
  // Indexed by engine index, up to a bound (a lone engine of a huge
  // --engine-index goes to the locked map instead).
  constexpr std::uint32_t kIndexed = 256;
  for (std::uint32_t e : engines)
    if (s.ok() && !disable_log_stats && e < kIndexed) {
      if (m->engines_.size() <= e) m->engines_.resize(e + 1);
      s = m->MakeEngine(e, &m->engines_[e]);
    } else if (s.ok() && !disable_log_stats) {
      s = m->MakeEngine(e, &m->others_[e]);
    }
  // Every stream-outcome series exists from start-up, so rate() sees the
  // first outcome of each kind.
  for (const char* handler : {"/v1/completions", "/v1/chat/completions", "/v1/responses"})
    for (const char* outcome : {"completed", "client_disconnected", "error_after_headers"})
      if (s.ok())
        s = m->http_.stream_outcomes_total.Get({{"handler", handler}, {"outcome", outcome}},
                                               nullptr);
  if (!s.ok()) return s;
  *out = std::move(m);
  return Status::Ok();
}

Status RequestMetrics::MakeEngine(std::uint32_t index, std::unique_ptr<Engine>* out) const {
  auto e = std::make_unique<Engine>();
  e->label = std::to_string(index);
  const metrics::Labels base = {{"engine", e->label}, {"model_name", model_name_}};
  auto with = [&](const char* k, const char* v) {
    metrics::Labels l = base;
    l.emplace_back(k, v);
    return l;
  };
  const RequestFamilies& f = families_;
  Status s = f.prompt_tokens.Get(base, &e->prompt);
  if (s.ok())
    s = f.prompt_tokens_by_source.Get(with("source", "local_compute"), &e->prompt_compute);
  if (s.ok())
    s = f.prompt_tokens_by_source.Get(with("source", "local_cache_hit"), &e->prompt_cache_hit);
  // Never written (no KV connector); it reads 0, as every enumerable series.
  if (s.ok()) s = f.prompt_tokens_by_source.Get(with("source", "external_kv_transfer"), nullptr);
  if (s.ok()) s = f.prompt_tokens_cached.Get(base, &e->cached);
  if (s.ok()) s = f.generation_tokens.Get(base, &e->generation);
  for (const char* reason : ipc::kFinishedReasons)
    if (s.ok()) s = f.request_success.Get(with("finished_reason", reason), nullptr);
  const std::pair<const metrics::HistogramFamily*, metrics::Histogram*> histograms[] = {
      {&f.request_prompt_tokens, &e->req_prompt},
      {&f.request_generation_tokens, &e->req_generation},
      {&f.request_max_num_generation_tokens, &e->max_generation},
      {&f.request_params_n, &e->params_n},
      {&f.request_params_max_tokens, &e->params_max_tokens},
      {&f.request_prefill_kv_computed_tokens, &e->prefill_kv},
      {&f.time_to_first_token_seconds, &e->ttft},
      {&f.inter_token_latency_seconds, &e->itl},
      {&f.request_time_per_output_token_seconds, &e->tpot},
      {&f.e2e_request_latency_seconds, &e->e2e},
      {&f.request_queue_time_seconds, &e->queue},
      {&f.request_prefill_time_seconds, &e->prefill},
      {&f.request_decode_time_seconds, &e->decode},
      {&f.request_inference_time_seconds, &e->inference},
      {&f.request_num_preemptions, &e->preemptions}};
  for (const auto& [family, handle] : histograms)
    if (s.ok()) s = family->Get(base, handle);
  if (s.ok() && detailed_.any()) s = MakeDetailed(e.get());
  *out = std::move(e);  // on failure, handles that drop updates (counted as overflow)
  return s;
}

RequestMetrics::Engine& RequestMetrics::For(std::uint32_t engine) {
  if (engine < engines_.size() && engines_[engine]) return *engines_[engine];
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<Engine>& e = others_[engine];
  if (!e) (void)MakeEngine(engine, &e);
  return *e;
}

void RequestMetrics::OnStreamOutcome(const std::string& handler, const char* outcome) {
  http_.stream_outcomes_total.With({{"handler", handler}, {"outcome", outcome}}).Inc();
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
  families_.request_success
      .With({{"engine", e.label},
             {"finished_reason", r.finished_reason},
             {"model_name", model_name_}})
      .Inc();
  e.req_prompt.Observe(r.prompt_tokens);
  e.req_generation.Observe(r.generation_tokens);
  if (r.max_tokens_set) e.params_max_tokens.Observe(r.max_tokens);
  e.prefill_kv.Observe(r.prompt_tokens - r.cached_tokens);
  e.preemptions.Observe(r.num_preemptions);
  const RequestIntervals i = IntervalsOf(r);
  if (i.e2e) e.e2e.Observe(*i.e2e);
  if (i.queue) e.queue.Observe(*i.queue);
  if (i.prefill) e.prefill.Observe(*i.prefill);
  if (i.decode) e.decode.Observe(*i.decode);
  if (i.tpot) e.tpot.Observe(*i.tpot);
  if (i.inference) e.inference.Observe(*i.inference);
  if (detailed_.model && r.forward_time >= 0) e.forward_ms.Observe(r.forward_time * 1000);
  if (detailed_.worker && r.execute_time >= 0) e.execute_ms.Observe(r.execute_time * 1000);
}

Status RequestMetrics::MakeDetailed(Engine* e) const {
  const metrics::Labels labels = {{"engine", e->label}, {"model_name", model_name_}};
  Status s;
  if (detailed_.model) s = forward_ms_.Get(labels, &e->forward_ms);
  if (s.ok() && detailed_.worker) s = execute_ms_.Get(labels, &e->execute_ms);
  return s;
}

Status RequestMetrics::EnableDetailedTraces(metrics::Registry* r, tracing::DetailedTraces modules) {
  if (!enabled_) return Status::Ok();  // --disable-log-stats: no request families
  // vLLM V0's: build_1_2_3_5_8_buckets(3000).
  const std::vector<double> buckets = {1,  2,   3,   5,   8,   10,  20,   30,   50,
                                       80, 100, 200, 300, 500, 800, 1000, 2000, 3000};
  Status s;
  if (modules.model)
    s = metrics::BuildHistogram()
            .Name("vllm:model_forward_time_milliseconds")
            .Help("Histogram of time spent in the model forward pass in ms.")
            .Labels({"engine", "model_name"})
            .Buckets(buckets)
            .Register(r, &forward_ms_);
  if (s.ok() && modules.worker)
    s = metrics::BuildHistogram()
            .Name("vllm:model_execute_time_milliseconds")
            .Help("Histogram of time spent in the model execute function in ms.")
            .Labels({"engine", "model_name"})
            .Buckets(buckets)
            .Register(r, &execute_ms_);
  if (!s.ok()) return s;
  // Every engine's series from now on, as the other request families'
  // (one made later gets them in MakeEngine). Called before any request.
  detailed_ = modules;
  for (auto& e : engines_)
    if (e && s.ok()) s = MakeDetailed(e.get());
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [index, e] : others_)
    if (s.ok()) s = MakeDetailed(e.get());
  return s;
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
  http_.requests_total.With({{"handler", handler}, {"method", method}, {"status", status_class}})
      .Inc();
  http_.request_size_bytes.With({{"handler", handler}})
      .Observe(static_cast<double>(e.request_bytes));
  http_.response_size_bytes.With({{"handler", handler}})
      .Observe(static_cast<double>(e.response_bytes));
  http_highr_.Observe(e.seconds);
  http_.request_duration_seconds.With({{"handler", handler}, {"method", method}})
      .Observe(e.seconds);
}

}  // namespace sightline::api
