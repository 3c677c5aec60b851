#include "support/http_client.h"

#include <strings.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace sightline::testing {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct HttpClient::Impl {
  Impl() : stream(io) {}
  void Send(std::string_view method, const std::string& target,
            const std::map<std::string, std::string>& fields, std::string body) {
    const beast::string_view name(method.data(), method.size());
    http::request<http::string_body> req(http::string_to_verb(name), target, 11);
    if (req.method() == http::verb::unknown) req.method_string(name);
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : fields) req.set(k, v);
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(stream, req);
  }
  template <class Message>
  static void CopyHead(const Message& m, Response* out) {
    out->status = static_cast<int>(m.result_int());
    for (const auto& f : m) out->fields.emplace_back(f.name_string(), f.value());
  }

  asio::io_context io;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
};

std::string HttpClient::Response::operator[](std::string_view name) const {
  for (const auto& [k, v] : fields) {
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), k.size()) == 0) return v;
  }
  return {};
}

// As Beast reads Transfer-Encoding: chunked when it is the last coding,
// compared case-insensitively.
bool HttpClient::Response::chunked() const {
  const std::string codings = (*this)["Transfer-Encoding"];
  const std::size_t end = codings.find_last_not_of(" \t");
  if (end == std::string::npos) return false;
  const std::size_t comma = codings.rfind(',', end);
  const std::size_t begin =
      codings.find_first_not_of(" \t", comma == std::string::npos ? 0 : comma + 1);
  const std::string_view last(codings.data() + begin, end + 1 - begin);
  return last.size() == 7 && strncasecmp(last.data(), "chunked", 7) == 0;
}

HttpClient::HttpClient(int port) : impl_(std::make_unique<Impl>()) {
  impl_->stream.connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"),
                                                static_cast<unsigned short>(port)));
}

HttpClient::~HttpClient() = default;

HttpClient::Response HttpClient::Request(std::string_view method, const std::string& target,
                                         const std::map<std::string, std::string>& fields,
                                         std::string body) {
  impl_->Send(method, target, fields, std::move(body));
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  if (method == "HEAD") parser.skip(true);
  http::read(impl_->stream, impl_->buffer, parser);
  Response out;
  Impl::CopyHead(parser.get(), &out);
  out.content = std::move(parser.get().body());
  return out;
}

HttpClient::Response HttpClient::Stream(std::string_view method, const std::string& target,
                                        const std::map<std::string, std::string>& fields,
                                        std::string body,
                                        const std::function<void(std::string_view)>& on_body) {
  impl_->Send(method, target, fields, std::move(body));
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);
  http::read_header(impl_->stream, impl_->buffer, parser);
  Response out;
  Impl::CopyHead(parser.get(), &out);
  char piece[16384];
  while (!parser.is_done()) {
    parser.get().body().data = piece;
    parser.get().body().size = sizeof piece;
    beast::error_code ec;
    http::read_some(impl_->stream, impl_->buffer, parser, ec);
    if (ec && ec != http::error::need_buffer) throw beast::system_error(ec);
    const std::size_t n = sizeof piece - parser.get().body().size;
    if (n > 0) on_body(std::string_view(piece, n));
  }
  return out;
}

}  // namespace sightline::testing
