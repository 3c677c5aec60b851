#include "otlp_http.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sightline::tracing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

Status HttpUrl::Parse(const std::string& url, HttpUrl* out) {
  constexpr std::string_view kScheme = "http://";
  if (url.rfind(kScheme, 0) != 0)
    return Status::InvalidArgument("OTLP endpoint '" + url +
                                   "': only http:// URLs are supported (OTLP/HTTP; run a "
                                   "collector beside the server for TLS or gRPC)");
  const std::string rest = url.substr(kScheme.size());
  const std::size_t path_at = rest.find_first_of("/?#");
  const std::string authority = rest.substr(0, path_at);
  HttpUrl u;
  u.target = path_at == std::string::npos ? "" : rest.substr(path_at);
  if (!u.target.empty() && u.target[0] != '/') u.target = "/" + u.target;  // "?q" alone
  if (u.target.empty() || u.target == "/") u.target = "/v1/traces";
  if (const std::size_t hash = u.target.find('#'); hash != std::string::npos)
    u.target.resize(hash);  // a fragment is never sent
  std::size_t colon = authority.rfind(':');
  if (!authority.empty() && authority[0] == '[') {  // [v6 address]:port
    const std::size_t close = authority.find(']');
    if (close == std::string::npos)
      return Status::InvalidArgument("OTLP endpoint '" + url + "': bad IPv6 address");
    u.host = authority.substr(1, close - 1);
    if (authority.size() > close + 1 && authority[close + 1] != ':')
      return Status::InvalidArgument("OTLP endpoint '" + url + "': expected http://HOST:PORT/PATH");
    colon = authority.size() > close + 1 ? close + 1 : std::string::npos;
  } else {
    u.host = authority.substr(0, colon);
  }
  u.port = colon == std::string::npos ? "80" : authority.substr(colon + 1);
  int port = 0;
  const auto [end, ec] = std::from_chars(u.port.data(), u.port.data() + u.port.size(), port);
  if (u.host.empty() || ec != std::errc() || end != u.port.data() + u.port.size() || port <= 0 ||
      port > 65535 || authority.find('@') != std::string::npos)
    return Status::InvalidArgument("OTLP endpoint '" + url + "': expected http://HOST:PORT/PATH");
  *out = std::move(u);
  return Status::Ok();
}

namespace {

using Deadline = std::function<std::chrono::steady_clock::time_point()>;

// The host's addresses, waiting no longer than the deadline. An address
// needs no lookup. A name is resolved on a thread of its own, left behind
// if the deadline passes first: getaddrinfo cannot be cancelled, and Asio's
// resolver joins its thread when destroyed, which would hold a shutdown for
// as long as a dead DNS server takes to time out.
bool Resolve(const HttpUrl& url, const Deadline& deadline, std::vector<tcp::endpoint>* out,
             std::string* error) {
  beast::error_code ec;
  const auto address = net::ip::make_address(url.host, ec);
  if (!ec) {
    out->assign(1, tcp::endpoint(address, static_cast<unsigned short>(std::stoi(url.port))));
    return true;
  }
  struct State {
    std::mutex mu;
    std::condition_variable done_cv;
    bool done = false;
    std::vector<tcp::endpoint> endpoints;
    std::string error;
  };
  auto state = std::make_shared<State>();
  std::thread([state, host = url.host, service = url.port] {
    net::io_context io;
    tcp::resolver resolver(io);
    beast::error_code rec;
    const auto results = resolver.resolve(host, service, rec);
    std::lock_guard<std::mutex> lock(state->mu);
    if (rec) state->error = "resolve: " + rec.message();
    for (const auto& r : results) state->endpoints.push_back(r.endpoint());
    state->done = true;
    state->done_cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lock(state->mu);
  while (!state->done) {  // the deadline is read again: a shutdown may bring it closer
    const auto now = std::chrono::steady_clock::now(), end = deadline();
    if (now >= end) break;
    state->done_cv.wait_until(lock, std::min(end, now + std::chrono::milliseconds(20)));
  }
  if (!state->done) {
    *error = "resolve: timed out";
    return false;
  }
  *out = state->endpoints;
  *error = state->error;
  if (error->empty() && out->empty()) *error = "resolve: no address";
  return error->empty();
}

}  // namespace

PostResult HttpPost(const HttpUrl& url, const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const Deadline& deadline) {
  PostResult result;
  if (std::chrono::steady_clock::now() >= deadline()) {
    result.error = "timed out";
    return result;
  }
  std::vector<tcp::endpoint> endpoints;
  if (!Resolve(url, deadline, &endpoints, &result.error)) return result;
  // Beast's asynchronous operations on a private io_context, run on this
  // (the exporter's) thread: the way Asio gives a deadline over a connect and
  // the exchange together.
  net::io_context io;
  beast::tcp_stream stream(io);

  http::request<http::string_body> req{http::verb::post, url.target, 11};
  const bool v6 = url.host.find(':') != std::string::npos;
  req.set(http::field::host, (v6 ? "[" + url.host + "]" : url.host) + ":" + url.port);
  req.set(http::field::user_agent, "sightline-otlp");
  req.set(http::field::content_type, "application/x-protobuf");
  req.set(http::field::connection, "close");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024);  // a collector's answer is small
  auto fail = [&result](const char* what, beast::error_code ec) {
    result.error = std::string(what) + ": " + ec.message();
  };
  stream.expires_at(deadline());
  stream.async_connect(endpoints, [&](beast::error_code ec, const tcp::endpoint&) {
    if (ec) return fail("connect", ec);
    http::async_write(stream, req, [&](beast::error_code ec2, std::size_t) {
      if (ec2) return fail("write", ec2);
      http::async_read(stream, buffer, parser, [&](beast::error_code ec3, std::size_t) {
        // An answer too long to keep still says how the export went.
        if (ec3 && !(ec3 == http::error::body_limit && parser.is_header_done()))
          return fail("read", ec3);
        const auto& res = parser.get();
        result.status = static_cast<int>(res.result_int());
        if (!ec3) result.body = res.body();
        if (auto h = res.find(http::field::retry_after); h != res.end()) {
          double seconds = -1;
          const std::string_view v(h->value().data(), h->value().size());
          const auto [p, e] = std::from_chars(v.data(), v.data() + v.size(), seconds);
          if (e == std::errc() && p == v.data() + v.size() && seconds >= 0)
            result.retry_after = seconds;
        }
      });
    });
  });
  // Run in short slices until every handler has run or the deadline (read
  // again each time) has passed; the stream's expiry also bounds connect,
  // write and read on its own.
  while (!io.stopped()) {
    const auto now = std::chrono::steady_clock::now(), end = deadline();
    if (now >= end) break;
    io.run_for(
        std::min<std::chrono::steady_clock::duration>(end - now, std::chrono::milliseconds(20)));
  }
  if (result.status == 0 && result.error.empty()) result.error = "timed out";
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return result;
}

}  // namespace sightline::tracing
