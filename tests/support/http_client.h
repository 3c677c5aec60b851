// A blocking HTTP/1.1 test client on one keep-alive connection (Boost.Beast).
#pragma once

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <string>

namespace sightline::testing {

class HttpClient {
 public:
  using Response = boost::beast::http::response<boost::beast::http::string_body>;
  explicit HttpClient(int port) : stream_(io_) {
    stream_.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                   static_cast<unsigned short>(port)));
  }
  Response Request(boost::beast::http::verb verb, const std::string& target,
                   const std::map<std::string, std::string>& headers = {}, std::string body = "") {
    namespace http = boost::beast::http;
    http::request<http::string_body> req(verb, target, 11);
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = std::move(body);
    req.prepare_payload();
    http::write(stream_, req);
    boost::beast::flat_buffer buffer;
    Response res;
    http::read(stream_, buffer, res);
    return res;
  }
  Response Post(const std::string& target, const std::string& json) {
    return Request(boost::beast::http::verb::post, target, {{"Content-Type", "application/json"}},
                   json);
  }
  boost::asio::ip::tcp::socket& socket() { return stream_.socket(); }

 private:
  boost::asio::io_context io_;
  boost::beast::tcp_stream stream_;
};

}  // namespace sightline::testing
