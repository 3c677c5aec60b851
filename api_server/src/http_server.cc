#include "sightline/api_server/http_server.h"

#include <sys/socket.h>

#include <zlib.h>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstring>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "sightline/api_server/detokenizer.h"

namespace sightline::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpResponse ErrorResponse(int status, const std::string& message, const std::string& type,
                           const std::string& param) {
  std::size_t pending = 0;
  const nlohmann::json param_json =
      param.empty() ? nlohmann::json(nullptr) : nlohmann::json(ValidUtf8Prefix(param, true, &pending));
  HttpResponse r;
  r.status = status;
  // The text is sanitised above; replace is the second line of defence, so a
  // body is always built.
  r.body = nlohmann::json{{"error",
                           {{"message", ValidUtf8Prefix(message, true, &pending)},
                            {"type", type},
                            {"param", param_json},
                            {"code", status}}}}
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

std::string Gzip(const std::string& data) {
  z_stream zs{};
  // 15 + 16: a gzip (not zlib) wrapper, as HTTP's Content-Encoding: gzip wants.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return {};
  std::string out(deflateBound(&zs, static_cast<uLong>(data.size())), '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

namespace {
// One chunk of a chunked body on the wire: hex size, CRLF, data, CRLF
// (RFC 9112 §7.1). Written by hand because it runs once per streamed token
// and Beast's chunk_body would need the data to outlive the write; one
// allocation, one copy.
std::string ChunkWire(const std::string& data) {
  char size[24];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string wire;
  wire.reserve(static_cast<std::size_t>(n) + data.size() + 2);
  wire.append(size, static_cast<std::size_t>(n)).append(data).append("\r\n", 2);
  return wire;
}

// The wire bytes of a Beast chunk (size line, data, CRLF), owned until written.
template <typename Buffers>
std::string Encode(const Buffers& buffers) {
  std::string out;
  for (auto b : beast::buffers_range(buffers))
    out.append(static_cast<const char*>(b.data()), b.size());
  return out;
}
}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::map<std::pair<std::string, std::string>, AsyncHandler> routes;  // (method, path)
  std::vector<std::thread> threads;
  int bound_port = 0;
  std::atomic<bool> draining{false};  // StopAccepting() was called
  std::atomic<int> answering{0};      // requests read whose answer is not fully written

  bool Authorized(const HttpRequest& req) const {
    if (options.api_key.empty()) return true;
    for (const auto& open : options.open_paths)
      if (req.path == open) return true;
    auto it = req.headers.find("authorization");
    // Constant-time comparison: the key is a secret.
    const std::string expected = "Bearer " + options.api_key;
    if (it == req.headers.end() || it->second.size() != expected.size()) return false;
    unsigned char diff = 0;
    for (std::size_t i = 0; i < expected.size(); ++i)
      diff |= static_cast<unsigned char>(it->second[i] ^ expected[i]);
    return diff == 0;
  }

  // The handler for a request, or an error response when there is none.
  const AsyncHandler* Find(const HttpRequest& req, HttpResponse* error) const {
    auto it = routes.find({req.method, req.path});
    if (it == routes.end()) it = routes.find({"", req.path});
    if (it != routes.end()) return &it->second;
    for (const auto& [key, handler] : routes)
      if (key.second == req.path) {
        *error = ErrorResponse(405, "method " + req.method + " not allowed on " + req.path,
                               "BadRequestError");
        return nullptr;
      }
    *error = ErrorResponse(404, "no route for " + req.path, "NotFoundError");
    return nullptr;
  }

  void Accept() {
    // Each connection gets its own strand: its handlers and writes never overlap.
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) {
        // Streamed tokens are small writes: without TCP_NODELAY, Nagle holds
        // each one until the previous is acknowledged (40 ms with a delayed
        // ACK), which a client would see as inter-token latency.
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<Session>(this, std::move(socket))->Read();
      }
      if (acceptor.is_open()) Accept();
    });
  }

  struct Session;

  // Answers one request of a session; safe to call from any thread.
  class SessionResponder : public Responder {
   public:
    SessionResponder(std::shared_ptr<Session> s, bool keep_alive, unsigned version)
        : session_(std::move(s)), keep_alive_(keep_alive), version_(version) {}
    void Send(HttpResponse r) override {
      auto self = session_;
      asio::post(self->stream.get_executor(),
                 [self, r = std::move(r), ka = keep_alive_, v = version_]() mutable {
                   self->Finish(std::move(r), ka, v);
                 });
    }
    void StartStream(int status, std::string type,
                     std::map<std::string, std::string> headers) override {
      auto self = session_;
      asio::post(self->stream.get_executor(),
                 [self, status, type = std::move(type), headers = std::move(headers),
                  v = version_]() mutable {
                   self->StreamHeader(status, std::move(type), std::move(headers), v);
                 });
    }
    void Write(std::string chunk) override {
      if (chunk.empty()) return;  // a zero-size chunk would end the stream
      auto self = session_;
      asio::post(self->stream.get_executor(), [self, wire = ChunkWire(chunk)]() mutable {
        self->Queue(std::move(wire), false);
      });
    }
    void End() override {
      auto self = session_;
      asio::post(self->stream.get_executor(), [self] { self->EndStream(); });
    }
    void OnDisconnect(std::function<void()> cb) override {
      auto self = session_;
      asio::post(self->stream.get_executor(), [self, cb = std::move(cb)]() mutable {
        if (self->gone) return cb();
        self->on_disconnect = std::move(cb);
      });
    }

   private:
    std::shared_ptr<Session> session_;
    bool keep_alive_;
    unsigned version_;
  };

  // One connection: read a request, answer, repeat while keep-alive. All
  // members are touched only on the connection's strand.
  struct Session : std::enable_shared_from_this<Session> {
    Session(Impl* server, tcp::socket s) : impl(server), stream(std::move(s)) {}
    Impl* impl;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    std::unique_ptr<http::request_parser<http::string_body>> parser;
    http::response<http::string_body> res;
    // Streaming state: the header, then chunks written one at a time.
    std::unique_ptr<http::response<http::empty_body>> stream_header;
    std::unique_ptr<http::response_serializer<http::empty_body>> serializer;
    std::deque<std::pair<std::string, bool>> pending;  // (chunk in wire form, is the last one)
    bool writing = false, ending = false, gone = false, answered = false;
    bool counted = false;  // this session's request is in impl->answering
    std::function<void()> on_disconnect;

    ~Session() { AnswerDone(); }
    void AnswerDone() {
      if (counted) --impl->answering;
      counted = false;
    }

    void Read() {
      parser = std::make_unique<http::request_parser<http::string_body>>();
      parser->body_limit(impl->options.max_body_bytes);
      stream.expires_after(std::chrono::seconds(60));  // idle keep-alive connections go
      http::async_read(
          stream, buffer, *parser,
          [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
    }

    void OnRead(beast::error_code ec) {
      if (ec == http::error::end_of_stream || ec == beast::error::timeout) return Close();
      if (ec == http::error::body_limit)
        return Finish(ErrorResponse(413,
                                    "request body exceeds " +
                                        std::to_string(impl->options.max_body_bytes) + " bytes",
                                    "BadRequestError"),
                      false, 11);
      if (ec)
        return Finish(ErrorResponse(400, std::string("malformed HTTP request: ") + ec.message(),
                                    "BadRequestError"),
                      false, 11);
      const auto& m = parser->get();
      HttpRequest req;
      req.method = std::string(m.method_string());
      const std::string target(m.target());
      const auto q = target.find('?');
      req.path = target.substr(0, q);
      if (q != std::string::npos) req.query = target.substr(q + 1);
      for (const auto& field : m) {
        std::string name(field.name_string());
        for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        req.headers[name] = std::string(field.value());
      }
      req.body = m.body();
      answered = false;
      counted = true;
      ++impl->answering;
      stream.expires_never();  // the handler may take as long as generation does
      HttpResponse error;
      if (!impl->Authorized(req))
        return Finish(ErrorResponse(401, "missing or invalid API key", "AuthenticationError"),
                      m.keep_alive(), m.version());
      if (impl->draining && req.path != "/metrics")
        return Finish(ErrorResponse(503, "the server is shutting down", "ServiceUnavailableError"),
                      false, m.version());
      const AsyncHandler* handler = impl->Find(req, &error);
      if (!handler) return Finish(std::move(error), m.keep_alive(), m.version());
      WatchForHangup();
      (*handler)(
          req, std::make_shared<SessionResponder>(shared_from_this(), m.keep_alive(), m.version()));
    }

    // While a request is being answered, a readable socket with nothing to
    // read means the client hung up.
    void WatchForHangup() {
      stream.socket().async_wait(
          tcp::socket::wait_read,
          asio::bind_executor(stream.get_executor(),
                              [self = shared_from_this()](beast::error_code ec) {
                                if (ec || self->answered) return;
                                char byte;
                                if (::recv(self->stream.socket().native_handle(), &byte, 1,
                                           MSG_PEEK | MSG_DONTWAIT) == 0)
                                  self->Hangup();
                              }));
    }

    void Hangup() {
      if (gone) return;
      gone = true;
      AnswerDone();
      if (on_disconnect) std::exchange(on_disconnect, nullptr)();
      Close();
    }

    void Finish(HttpResponse r, bool keep_alive, unsigned version) {
      if (gone || answered) return;
      answered = true;
      res = {};
      res.version(version);
      res.result(static_cast<http::status>(r.status));
      res.set(http::field::server, "sightline");
      res.set(http::field::content_type, r.content_type);
      for (const auto& [k, v] : r.headers) res.set(k, v);
      res.body() = std::move(r.body);
      res.keep_alive(keep_alive);
      res.prepare_payload();
      http::async_write(stream, res,
                        [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
                          self->AnswerDone();
                          if (ec) return self->Hangup();
                          if (!keep_alive || self->impl->draining) return self->Close();
                          self->Read();
                        });
    }

    void StreamHeader(int status, std::string type, std::map<std::string, std::string> headers,
                      unsigned version) {
      if (gone || answered) return;
      stream_header = std::make_unique<http::response<http::empty_body>>(
          static_cast<http::status>(status), version);
      stream_header->set(http::field::server, "sightline");
      stream_header->set(http::field::content_type, type);
      stream_header->set(http::field::cache_control, "no-cache");
      for (const auto& [k, v] : headers) stream_header->set(k, v);
      stream_header->chunked(true);
      stream_header->keep_alive(false);  // one stream per connection keeps the framing simple
      serializer = std::make_unique<http::response_serializer<http::empty_body>>(*stream_header);
      writing = true;
      http::async_write_header(stream, *serializer,
                               [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                 self->writing = false;
                                 if (ec) return self->Hangup();
                                 self->Pump();
                               });
    }

    void Queue(std::string encoded, bool last) {
      if (gone) return;
      pending.emplace_back(std::move(encoded), last);
      Pump();
    }

    void EndStream() {
      if (gone) return;
      ending = true;
      Pump();
    }

    void Pump() {
      if (writing || gone || !serializer) return;
      if (pending.empty()) {
        if (!ending) return;
        ending = false;
        answered = true;
        pending.emplace_back(Encode(http::make_chunk_last()), true);
      }
      writing = true;
      const bool last = pending.front().second;
      // The raw socket: no Beast timer or rate policy per chunk (the stream has
      // no deadline while an answer is being written; see OnRead).
      asio::async_write(stream.socket(), asio::buffer(pending.front().first),
                        [self = shared_from_this(), last](beast::error_code ec, std::size_t) {
                          self->writing = false;
                          self->pending.pop_front();
                          if (ec) return self->Hangup();
                          if (last) {
                            self->AnswerDone();
                            return self->Close();
                          }
                          self->Pump();
                        });
    }

    void Close() {
      beast::error_code ignored;
      stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    }
  };
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() {
  Stop();
}

void HttpServer::Route(const std::string& method, const std::string& path, HttpHandler handler) {
  RouteAsync(method, path,
             [handler = std::move(handler)](const HttpRequest& r, std::shared_ptr<Responder> out) {
               out->Send(handler(r));
             });
}

void HttpServer::RouteAsync(const std::string& method, const std::string& path,
                            AsyncHandler handler) {
  impl_->routes[{method, path}] = std::move(handler);
}

int HttpServer::port() const {
  return impl_->bound_port;
}

Status HttpServer::Start() {
  Impl& m = *impl_;
  beast::error_code ec;
  if (m.options.inherited_fd >= 0) {
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    if (getsockname(m.options.inherited_fd, reinterpret_cast<sockaddr*>(&local), &length) != 0)
      return Status::IoError("listening fd " + std::to_string(m.options.inherited_fd) +
                             " is not a socket: " + std::strerror(errno));
    m.acceptor.assign(local.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), m.options.inherited_fd,
                      ec);
    if (ec)
      return Status::IoError("cannot adopt listening fd " + std::to_string(m.options.inherited_fd) +
                             ": " + ec.message());
  } else {
    const auto address = asio::ip::make_address(m.options.host, ec);
    if (ec) return Status::InvalidArgument("invalid --host '" + m.options.host + "'");
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(m.options.port));
    m.acceptor.open(endpoint.protocol(), ec);
    if (!ec) m.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) {  // N API servers on one port
      const int one = 1;
      if (setsockopt(m.acceptor.native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0)
        return Status::IoError("SO_REUSEPORT: " + std::string(std::strerror(errno)));
    }
    if (!ec) m.acceptor.bind(endpoint, ec);
    if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return Status::IoError("cannot listen on " + m.options.host + ":" +
                             std::to_string(m.options.port) + ": " + ec.message());
  }
  m.bound_port = m.acceptor.local_endpoint(ec).port();
  m.Accept();
  for (int i = 0; i < std::max(1, m.options.threads); ++i)
    m.threads.emplace_back([&m] { m.io.run(); });
  return Status::Ok();
}

void HttpServer::StopAccepting() {
  Impl& m = *impl_;
  m.draining = true;
  asio::post(m.io, [&m] {
    beast::error_code ignored;
    m.acceptor.close(ignored);
  });
}

bool HttpServer::Drain(double timeout_s) {
  StopAccepting();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (impl_->answering.load() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (m.threads.empty()) return;
  asio::post(m.io, [&m] {
    beast::error_code ignored;
    m.acceptor.close(ignored);
  });
  m.io.stop();
  for (auto& t : m.threads) t.join();
  m.threads.clear();
}

}  // namespace sightline::api
