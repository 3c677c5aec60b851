// What every connection asks of its server: authorization, routing, and the
// I/O threads' loop.
#include <cstdio>
#include <exception>
#include <set>

#include "http/http_core.h"
#include "http/http_protocol.h"

namespace sightline::api::http_internal {

bool HttpCore::Authorized(const HttpRequest& req) const {
  if (options.api_key.empty()) return true;
  for (const auto& open : options.open_paths)
    if (req.path == open) return true;
  auto it = req.headers.find("authorization");
  return it != req.headers.end() && BearerMatches(it->second, options.api_key);
}

const AsyncHandler* HttpCore::Find(const HttpRequest& req, HttpResponse* error) const {
  auto it = routes.find({req.method, req.path});
  // HEAD is GET without the body (RFC 9110 §9.3.2); the session drops it.
  if (it == routes.end() && req.method == "HEAD") it = routes.find({"GET", req.path});
  if (it == routes.end()) it = routes.find({"", req.path});
  if (it != routes.end()) return &it->second;
  std::set<std::string> allowed;
  for (const auto& [key, handler] : routes)
    if (key.second == req.path) allowed.insert(key.first);
  if (allowed.empty()) {
    *error = ErrorResponse(404, "no route for " + req.path, "NotFoundError");
    return nullptr;
  }
  if (allowed.count("GET")) allowed.insert("HEAD");
  std::string allow;
  for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
  *error =
      ErrorResponse(405, "method " + req.method + " not allowed on " + req.path, "BadRequestError");
  error->headers["Allow"] = allow;  // RFC 9110 §15.5.6: a 405 MUST carry it
  return nullptr;
}

void RunLoop(boost::asio::io_context& io) {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sightline: HTTP: exception escaped a handler: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "sightline: HTTP: exception escaped a handler\n");
    }
  }
}

}  // namespace sightline::api::http_internal
