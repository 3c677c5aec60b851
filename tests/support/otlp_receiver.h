// OtlpReceiver: a stand-in OpenTelemetry collector for tests, on loopback.
// It accepts OTLP/HTTP POSTs (one connection at a time, as the exporter
// sends them), decodes each body (gunzipped if it says so) as an
// ExportTraceServiceRequest with the classes protoc generates from
// tracing/proto, and answers as told: a status, after a delay, or held
// until released (a collector that hangs). An export it answers 2xx is
// recorded even if the client gave up waiting (and may send it again).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace sightline::testing {

class OtlpReceiver {
 public:
  using ExportRequest = opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;
  using Span = opentelemetry::proto::trace::v1::Span;

  struct Answer {
    int status = 200;
    double delay_seconds = 0;
    bool hold = false;        // answer only once Release() is called
    std::string retry_after;  // a Retry-After header, when not empty
  };

  // Listens on 127.0.0.1, a free port.
  OtlpReceiver();
  ~OtlpReceiver();

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1/traces"; }
  void set_answer(Answer a);
  void Release();  // ends every hold, now and later

  // What arrived: every POST (whatever it was answered), and the requests
  // that were answered 2xx, decoded.
  std::size_t posts();
  std::vector<ExportRequest> accepted();
  std::vector<Span> spans();                          // of accepted(), in order
  std::map<std::string, std::string> last_headers();  // lower-case names
  std::size_t bad_bodies();  // POSTs whose body did not decode (answered 400)
  bool holding();            // a POST is being held now
  // Waits (up to `seconds`) until `n` spans were accepted / `n` POSTs came.
  bool WaitForSpans(std::size_t n, double seconds = 60);
  bool WaitForPosts(std::size_t n, double seconds = 60);

 private:
  void Serve();
  struct Net;
  std::unique_ptr<Net> net_;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable changed_;
  Answer answer_;
  bool released_ = false, stopping_ = false, holding_ = false;
  std::size_t posts_ = 0, bad_bodies_ = 0;
  std::vector<ExportRequest> accepted_;
  std::map<std::string, std::string> last_headers_;
  std::thread thread_;
};

}  // namespace sightline::testing
