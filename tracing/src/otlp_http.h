// One OTLP/HTTP export: a POST of an encoded request to the collector, with
// a deadline over the whole exchange (resolve, connect, write, read).
// Internal to the tracing library; the exporter's thread is its only caller.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sightline/status.h"

namespace sightline::tracing {

// An http:// URL taken apart. InvalidArgument for anything else (https is
// not supported: run a collector beside the server, as the OTLP docs do).
struct HttpUrl {
  std::string host, port, target;  // target: the path and query ("/v1/traces" when none)
  static Status Parse(const std::string& url, HttpUrl* out);
};

struct PostResult {
  int status = 0;           // the HTTP status; 0: no answer (see error)
  std::string error;        // why there was no answer
  std::string body;         // the answer's body (bounded)
  double retry_after = -1;  // Retry-After in seconds, when the answer had one
};

// POSTs `body` (Content-Type application/x-protobuf) to `url` with
// `headers`, giving up at `deadline()`, which is read again every few
// milliseconds (a shutdown can bring it closer while the POST is under way).
PostResult HttpPost(const HttpUrl& url, const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::function<std::chrono::steady_clock::time_point()>& deadline);

}  // namespace sightline::tracing
