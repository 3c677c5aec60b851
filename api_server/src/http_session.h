// The connection side of HttpServer: what a connection needs of its server
// (HttpCore) and the two ways an accepted socket is served. Internal to
// api_server; see http_server.h for the contract.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cstddef>
#include <map>
#include <string>
#include <utility>

#include "sightline/api_server/http_server.h"

namespace sightline::api::http_internal {

// Shared by the server and its connections. It outlives every connection:
// HttpServer stops and joins its io_context (destroying pending handlers,
// hence sessions) before the core goes.
struct HttpCore {
  HttpServerOptions options;
  std::size_t max_connections = 0;  // resolved at Start()
  // (method, path) -> handler; read-only once serving. Method "" is any.
  std::map<std::pair<std::string, std::string>, AsyncHandler> routes;
  std::atomic<bool> draining{false};  // StopAccepting() was called
  std::atomic<int> answering{0};      // requests read whose answer is not fully written
  std::atomic<std::size_t> connections{0};  // admitted connections alive
  std::atomic<std::size_t> refusing{0};     // over-cap connections being answered 503

  bool Authorized(const HttpRequest& req) const;
  // The handler for a request (HEAD falls back to GET), or nullptr with the
  // 404, or the 405 carrying `Allow`, in *error.
  const AsyncHandler* Find(const HttpRequest& req, HttpResponse* error) const;
};

// Connections beyond max_connections are refused with 503 while at most this
// many refusals are in flight (each holds a descriptor for a moment); beyond
// that they are closed at once. Part of the descriptor headroom the default
// cap leaves.
constexpr std::size_t kMaxRefusing = 64;

// Serves an accepted connection: reads requests, dispatches them, answers.
// The socket's executor must be a strand (one per connection).
void ServeConnection(HttpCore* core, boost::asio::ip::tcp::socket socket);
// Answers an accepted connection over the cap with 503 (an OpenAI error
// body, Connection: close) without reading a request, then closes it.
void RefuseConnection(HttpCore* core, boost::asio::ip::tcp::socket socket);

// Runs `io` on the calling thread until it is stopped or out of work. An
// exception escaping a completion handler is logged and the loop resumed, so
// it costs at most that handler's connection, never the thread or process.
void RunLoop(boost::asio::io_context& io);

}  // namespace sightline::api::http_internal
