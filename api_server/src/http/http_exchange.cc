// The HTTP metric families' one source: every request a Session reads is
// reported here once, whatever answers it (HttpExchange in http_server.h).
// A request begins when its request line is read and ends at the first of:
// its answer's last bytes handed to the socket (Finish, EndStream), the
// client gone (Hangup, a read that failed after the request line), or the
// session's end.
#include <charconv>

#include "http/http_protocol.h"
#include "http/http_session.h"

namespace sightline::api::http_internal {

namespace {

// RFC 9110 §8.6: a decimal number; anything else (absent, or a value the
// parser refused) counts as 0, as the instrumentator's int(... or 0) does.
std::size_t ContentLength(const http::request_parser<http::string_body>& parser) {
  const auto& m = parser.get();
  const auto it = m.find(http::field::content_length);
  if (it == m.end()) return 0;
  const beast::string_view v = it->value();
  std::size_t n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  return ec == std::errc() && end == v.data() + v.size() ? n : 0;
}

// The `method` label: RFC 9110's methods and PATCH as sent, any other token
// as "other". A client may send any token as a method, and each new label
// value would be a series in the shared registry for the instance's life:
// a few thousand requests could fill its tables (vLLM's in-process registry
// just grows; its default HTTP parser refuses unknown methods before the
// app, so they count nothing there).
std::string_view MethodLabel(http::verb v) {
  switch (v) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::post:
    case http::verb::put:
    case http::verb::delete_:
    case http::verb::connect:
    case http::verb::options:
    case http::verb::trace:
    case http::verb::patch: {
      const beast::string_view name = http::to_string(v);
      return {name.data(), name.size()};
    }
    default:
      return "other";
  }
}

}  // namespace

std::string_view HttpCore::RouteTemplate(const std::string& path) const {
  // Routes are exact paths, so a matched path is its own template.
  for (const auto& [key, handler] : routes)
    if (key.second == path) return key.second;
  return "none";
}

void Session::BeginExchange() {
  if (exchange_.open || !core_->options.on_exchange) return;
  const auto& m = parser_->get();
  // Beast stores the target once the whole request line is parsed: before
  // that there is no request to count.
  if (m.target().empty()) return;
  std::string path, query;
  SplitTarget(std::string_view(m.target().data(), m.target().size()), &path, &query);
  // Routes are exact paths, so an excluded path is excluded whether or not
  // this server has a route for it (/load untracked, /server_info).
  if (core_->options.uninstrumented_paths.contains(path)) return;
  const std::string_view handler = core_->RouteTemplate(path);
  exchange_.open = true;
  exchange_.handler = handler;
  exchange_.method = std::string(MethodLabel(m.method()));
  exchange_.status = 0;
  exchange_.request_bytes = ContentLength(*parser_);
  exchange_.response_bytes = 0;
  exchange_.start = Clock::now();
}

void Session::EndExchange(int unanswered) {
  if (!exchange_.open) return;
  exchange_.open = false;
  HttpExchange e;
  e.handler = exchange_.handler;
  e.method = exchange_.method;
  e.status = exchange_.status != 0 ? exchange_.status : unanswered;
  e.request_bytes = exchange_.request_bytes;
  e.response_bytes = exchange_.response_bytes;
  e.seconds = std::chrono::duration<double>(Clock::now() - exchange_.start).count();
  // A throwing observer costs its report, never the connection.
  try {
    core_->options.on_exchange(e);
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "sightline: HTTP: reporting a request: %s\n", ex.what());
  } catch (...) {
    std::fprintf(stderr, "sightline: HTTP: reporting a request: unknown exception\n");
  }
}

}  // namespace sightline::api::http_internal
