// vLLM's ORCA load report: a request that sends
//   endpoint-load-metrics-format: TEXT   (or JSON, any case)
// gets its non-streamed answer with
//   endpoint-load-metrics: TEXT named_metrics.kv_cache_usage_perc=0.42,
//   named_metrics.num_requests_waiting=5.0 endpoint-load-metrics: JSON {"named_metrics":
//   {"kv_cache_usage_perc": 0.42, "num_requests_waiting": 5.0}}
// (vllm/entrypoints/openai/orca_metrics.py: the values as Python prints
// floats, TEXT's pairs joined by ", ", JSON with json.dumps' separators). A
// missing, empty or other value gets no header; streams get none, as in vLLM.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "http/http_server.h"
#include "sightline/shm_registry/registry.h"

namespace sightline::api {

enum class LoadReportFormat { kNone, kText, kJson };

// The request's endpoint-load-metrics-format.
LoadReportFormat RequestedLoadReport(const HttpRequest& request);

// The header's value.
std::string LoadReportHeader(LoadReportFormat format, double kv_cache_usage_perc,
                             double num_requests_waiting);

// The two values as /metrics shows them now (the whole registry rendered
// and read: only requests that ask pay for it): vllm:kv_cache_usage_perc,
// the largest over engines, and vllm:num_requests_waiting, summed.
void ReadLoadReport(metrics::Registry* registry, double* kv_cache_usage_perc,
                    double* num_requests_waiting);

// `out`, but Send() adds the endpoint-load-metrics header that `value`
// returns when the answer is sent (so the report is as of the answer).
std::shared_ptr<Responder> WithLoadReport(std::shared_ptr<Responder> out,
                                          std::function<std::string()> value);

// Python's repr of a float: the shortest round trip, "5.0" for 5.
std::string PythonFloat(double v);

}  // namespace sightline::api
