#include "sightline/api_server/http_server.h"

#include <sys/socket.h>

#include <zlib.h>
#include <cctype>
#include <cstring>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace sightline::api {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

HttpResponse ErrorResponse(int status, const std::string& message, const std::string& type) {
  HttpResponse r;
  r.status = status;
  r.body =
      nlohmann::json{
          {"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}}
          .dump();
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

struct HttpServer::Impl {
  HttpServerOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::map<std::pair<std::string, std::string>, HttpHandler> routes;  // (method, path)
  std::vector<std::thread> threads;
  int bound_port = 0;

  HttpResponse Dispatch(const HttpRequest& req) {
    auto it = routes.find({req.method, req.path});
    if (it == routes.end()) it = routes.find({"", req.path});
    if (it != routes.end()) return it->second(req);
    for (const auto& [key, handler] : routes)
      if (key.second == req.path)
        return ErrorResponse(405, "method " + req.method + " not allowed on " + req.path,
                             "BadRequestError");
    return ErrorResponse(404, "no route for " + req.path, "NotFoundError");
  }

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (!ec) std::make_shared<Session>(this, std::move(socket))->Read();
      if (acceptor.is_open()) Accept();
    });
  }

  // One connection: read a request, answer, repeat while keep-alive.
  struct Session : std::enable_shared_from_this<Session> {
    Session(Impl* server, tcp::socket s) : impl(server), stream(std::move(s)) {}
    Impl* impl;
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    std::unique_ptr<http::request_parser<http::string_body>> parser;
    http::response<http::string_body> res;

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
      if (ec == http::error::body_limit) {
        Send(ErrorResponse(
                 413,
                 "request body exceeds " + std::to_string(impl->options.max_body_bytes) + " bytes",
                 "BadRequestError"),
             false, 11);
        return;
      }
      if (ec) {
        Send(ErrorResponse(400, std::string("malformed HTTP request: ") + ec.message(),
                           "BadRequestError"),
             false, 11);
        return;
      }
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
      Send(impl->Dispatch(req), m.keep_alive(), m.version());
    }

    void Send(HttpResponse r, bool keep_alive, unsigned version) {
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
                          if (ec || !keep_alive) return self->Close();
                          self->Read();
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
  impl_->routes[{method, path}] = std::move(handler);
}

int HttpServer::port() const {
  return impl_->bound_port;
}

Status HttpServer::Start() {
  Impl& m = *impl_;
  beast::error_code ec;
  if (m.options.inherited_fd >= 0) {
    m.acceptor.assign(tcp::v4(), m.options.inherited_fd, ec);
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
