#include "otlp_http.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>
#include <chrono>

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
  const std::size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  HttpUrl u;
  u.target = slash == std::string::npos ? "" : rest.substr(slash);
  if (u.target.empty() || u.target == "/") u.target = "/v1/traces";
  std::size_t colon = authority.rfind(':');
  if (!authority.empty() && authority[0] == '[') {  // [v6 address]:port
    const std::size_t close = authority.find(']');
    if (close == std::string::npos)
      return Status::InvalidArgument("OTLP endpoint '" + url + "': bad IPv6 address");
    u.host = authority.substr(1, close - 1);
    colon =
        authority.size() > close + 1 && authority[close + 1] == ':' ? close + 1 : std::string::npos;
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

PostResult HttpPost(const HttpUrl& url, const std::string& body,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::function<std::chrono::steady_clock::time_point()>& deadline) {
  // Beast's asynchronous operations on a private io_context, run on this
  // (the exporter's) thread: the only way Asio gives a deadline over a
  // resolve, a connect and the exchange together.
  net::io_context io;
  tcp::resolver resolver(io);
  beast::tcp_stream stream(io);

  http::request<http::string_body> req{http::verb::post, url.target, 11};
  req.set(http::field::host, url.host + ":" + url.port);
  req.set(http::field::user_agent, "sightline-otlp");
  req.set(http::field::content_type, "application/x-protobuf");
  req.set(http::field::connection, "close");
  for (const auto& [name, value] : headers) req.set(name, value);
  req.body() = body;
  req.prepare_payload();

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024);  // a collector's answer is small
  PostResult result;
  auto fail = [&result](const char* what, beast::error_code ec) {
    result.error = std::string(what) + ": " + ec.message();
  };
  resolver.async_resolve(
      url.host, url.port, [&](beast::error_code ec, tcp::resolver::results_type r) {
        if (ec) return fail("resolve", ec);
        stream.expires_at(deadline());
        stream.async_connect(r, [&](beast::error_code ec2, const tcp::endpoint&) {
          if (ec2) return fail("connect", ec2);
          http::async_write(stream, req, [&](beast::error_code ec3, std::size_t) {
            if (ec3) return fail("write", ec3);
            http::async_read(stream, buffer, parser, [&](beast::error_code ec4, std::size_t) {
              if (ec4) return fail("read", ec4);
              const auto& res = parser.get();
              result.status = static_cast<int>(res.result_int());
              result.body = res.body();
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
