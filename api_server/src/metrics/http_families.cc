#include "sightline/api_server/http_families.h"

namespace sightline::api {

namespace {

using metrics::BuildCounter;
using metrics::BuildHistogram;
using metrics::BuildSummary;

metrics::HistogramBuilder DurationHighr() {
  return BuildHistogram()
      .Name("http_request_duration_highr_seconds")
      .Help("Latency with many buckets but no API specific labels.")
      .Buckets({0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1,  1.5, 2,
                2.5,  3,     3.5,  4,     4.5, 5,    7.5, 10,   30, 60});
}

metrics::HistogramBuilder Duration() {
  return BuildHistogram()
      .Name("http_request_duration_seconds")
      .Help("Latency with only few buckets by handler.")
      .Labels({"handler", "method"})
      .Buckets({0.1, 0.5, 1});
}

}  // namespace

std::vector<metrics::HistogramBuilder> HttpFamilies::Histograms() {
  return {DurationHighr(), Duration()};
}

Status HttpFamilies::Register(metrics::Registry* r, HttpFamilies* f) {
  Status s = BuildCounter()
                 .Name("http_requests_total")
                 .Help("Total number of requests by method, status and handler.")
                 .Labels({"handler", "method", "status"})
                 .Register(r, &f->requests_total);
  if (s.ok())
    s = BuildSummary()
            .Name("http_request_size_bytes")
            .Help("Content length of incoming requests by handler.")
            .Labels({"handler"})
            .Register(r, &f->request_size_bytes);
  if (s.ok())
    s = BuildSummary()
            .Name("http_response_size_bytes")
            .Help("Content length of outgoing responses by handler.")
            .Labels({"handler"})
            .Register(r, &f->response_size_bytes);
  if (s.ok()) s = DurationHighr().Register(r, &f->request_duration_highr_seconds);
  if (s.ok()) s = Duration().Register(r, &f->request_duration_seconds);
  // METRICS.md §7, beyond vLLM: a 200 does not mean a stream was delivered.
  if (s.ok())
    s = BuildCounter()
            .Name("sightline:stream_outcomes_total")
            .Help(
                "Streamed responses by how they ended: completed (final chunk and [DONE] "
                "written), client_disconnected, error_after_headers (an error event, no "
                "[DONE]).")
            .Labels({"handler", "outcome"})
            .Register(r, &f->stream_outcomes_total);
  return s;
}

}  // namespace sightline::api
