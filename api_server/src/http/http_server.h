// HttpServer: HTTP/1.1 (and 1.0) on Boost.Beast/Asio with keep-alive and a
// bounded request body. It serves on a listening socket inherited from the
// supervisor, or binds one itself with SO_REUSEPORT so that N API-server
// processes share a port. Routing is by exact path (origin- or absolute-form
// targets); HEAD is answered by the GET route without the body; a 405
// carries Allow.
//
// Nothing a client sends ends the process or pins it: an exception escaping
// a handler becomes a 500 (and a line on stderr), one escaping the I/O loop
// costs its connection only; a request is refused on its header (Host
// missing on 1.1, or sent twice: 400; a transfer coding other than chunked:
// 501; 401; 503 while draining; no route: 404; a route without the method:
// 405) before its body is read or 100 Continue is sent, and a body over
// max_body_bytes is cut off with 413; reads and writes have deadlines;
// connections beyond a cap are answered 503 and closed.
//
// Every request whose request line was read is reported once, when its
// answer ends, to HttpServerOptions::on_exchange (the HTTP metric families),
// unless its path is one of uninstrumented_paths; see HttpExchange for what
// "once" and "ends" mean.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sightline/status.h"

namespace sightline::api {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // without the query string
  std::string query;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  std::string body;
};

// An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}.
// `message` and `param` may hold any bytes (a client's path, a field name):
// invalid UTF-8 becomes U+FFFD, so building the body never throws. An empty
// `param` is rendered as null.
HttpResponse ErrorResponse(int status, const std::string& message, const std::string& type,
                           const std::string& param = "");

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// How an asynchronous handler answers, later and from any thread: one Send(),
// or StartStream() + Write()* + End() (chunked transfer, e.g. server-sent
// events; to an HTTP/1.0 client the raw bytes, ended by closing); a stream's
// final data goes with End(), so that the exchange is reported before the
// client can see the end of the stream. The first Send() or StartStream()
// wins; calls after the answer is complete, or once the connection has moved
// on to another request, do nothing.
// OnDisconnect's callback runs once if the client goes away before the
// answer is complete (while waiting or mid-stream, or it stopped reading;
// bytes it sends meanwhile are kept for its next request, not a hangup).
// A Responder may outlive its HttpServer: once Stop() has returned, every
// call does nothing and no callback runs (the connection went with the
// server).
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void Send(HttpResponse response) = 0;
  virtual void StartStream(int status, std::string content_type,
                           std::map<std::string, std::string> headers = {}) = 0;
  virtual void Write(std::string chunk) = 0;
  // An empty string to build the next Write's chunk in: where a chunk this
  // stream wrote has gone out, its buffer, with its capacity, so that a
  // streamed token costs no heap allocation (issue 46). Any string may be
  // written instead; this only saves. Called, like Write, by one thread at
  // a time.
  virtual std::string ChunkBuffer() { return {}; }
  // Ends a stream; `last_chunk`, if any, is its last data, written before
  // the end and counted with the stream once the exchange is reported.
  virtual void End(std::string last_chunk) = 0;
  void End() { End(std::string()); }
  virtual void OnDisconnect(std::function<void()> callback) = 0;
};
using AsyncHandler = std::function<void(const HttpRequest&, std::shared_ptr<Responder>)>;

// One request as the HTTP layer answered it, reported exactly once per
// request whose request line and target were read, whatever the outcome:
// an answer from a handler or from the server itself (401, 404, 405, 413,
// a 400 for a malformed header, 503 while draining, 500 for a handler that
// threw), a stream however it ended, a client that went away. Input that
// never yields a request line (garbage, a bare close, an idle keep-alive
// connection, a connection over the cap) is no request and is not reported,
// as uvicorn answers it without calling the application.
//
// Reported on the connection's strand just before the answer's last bytes
// are handed to the socket, so a client holding the whole answer finds it
// counted; or when the client goes away or the session ends unanswered.
struct HttpExchange {
  // The route's path when some route has it (any method), else "none".
  std::string_view handler;
  std::string_view method;  // as sent, or "other" outside RFC 9110's methods and PATCH
  // The status sent (a stream's header status, however the stream ended);
  // 499 (nginx's "client closed request") when the client went away before
  // any answer began; 500 when the session ended without one.
  int status = 0;
  std::size_t request_bytes = 0;   // the Content-Length header; 0 without one
  std::size_t response_bytes = 0;  // body bytes sent (a stream's chunk payloads, no framing)
  double seconds = 0;              // from the header read to the last bytes handed over
};
using ExchangeObserver = std::function<void(const HttpExchange&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;        // 0: an ephemeral port (see HttpServer::port())
  int inherited_fd = -1;  // a listening socket from the supervisor, if any
  std::size_t max_body_bytes = 4u << 20;
  // I/O threads: they stream the answers of every path but control_paths.
  int threads = 1;
  // With one I/O thread, the streamed chunks that are ready when it wakes
  // (an engine step's, for every stream) are written in one io_uring
  // submission, when the kernel and process allow it (else, or false, one
  // sendmsg per connection; the bytes are the same either way).
  bool io_uring = true;
  // Answered on a thread of their own, the control thread, so that a scrape
  // or a health probe never waits behind the I/O threads' streamed tokens.
  // The control thread also accepts every connection and reads its first
  // request header; a connection that asks for another path moves to the
  // I/O threads (with what was read of it) and stays there.
  std::set<std::string, std::less<>> control_paths = {"/metrics", "/health", "/ping", "/load",
                                                      "/version"};
  // --api-key: requests must carry "Authorization: Bearer <key>", except on
  // these paths (liveness and scraping stay open).
  std::string api_key;
  std::vector<std::string> open_paths = {"/health", "/ping", "/metrics"};
  // A request's header must arrive within this (idle keep-alive time
  // included), and its body within this again; otherwise the connection is
  // closed (slow clients cannot hold connections).
  double read_timeout_s = 30;
  // A write during which the connection does not move for this long (the
  // client stopped reading) drops it, 1 to 1.25 times this after it last
  // moved: the OnDisconnect callback runs and what was queued is freed. It
  // moves when a write completes or the client acknowledges bytes (Linux's
  // TCP_INFO), so a slow client that keeps reading is not cut, however long
  // the body or stream and however large the kernel's send buffer.
  double write_timeout_s = 30;
  // Connections open at once; beyond it a new connection is answered 503
  // and closed. 0: derived from RLIMIT_NOFILE, with headroom left for the
  // 503s themselves.
  std::size_t max_connections = 0;
  // Called for every HttpExchange whose path is not in
  // `uninstrumented_paths`; on the HTTP threads (the control thread and the
  // I/O threads), so it must be thread-safe,
  // cheap, and outlive the server. Empty: nothing is reported.
  ExchangeObserver on_exchange;
  // vLLM's instrumentator excludes these routes (excluded_handlers).
  std::set<std::string, std::less<>> uninstrumented_paths = {
      "/metrics", "/health", "/load", "/ping", "/version", "/server_info"};
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // stops and joins
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Register before Start(). `method` empty: any method.
  void Route(const std::string& method, const std::string& path, HttpHandler handler);
  void RouteAsync(const std::string& method, const std::string& path, AsyncHandler handler);
  Status Start();  // binds (or adopts the fd) and serves on background threads
  // Draining: closes the listening socket (this process's copy) and answers
  // every new request except /metrics with 503 and Connection: close, while
  // answers already under way complete.
  void StopAccepting();
  // StopAccepting(), then waits until every answer under way has been written
  // (true) or `timeout_s` has passed (false).
  bool Drain(double timeout_s);
  void Stop();
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Gzip-compresses `data` (RFC 1952, ISA-L's igzip) at `level` (0-3, igzip's
// own: 1 is about zlib's 1 in size, in a fifth of the time zlib took here
// with a new stream per call). Level 1 by default: Prometheus asks every
// scrape for gzip and waits for it (api_bench BM_MetricsGzip; issue 46).
// Thread-safe; the empty string if it failed (or `data` is over 1 GiB).
std::string Gzip(const std::string& data, int level = 1);

}  // namespace sightline::api
