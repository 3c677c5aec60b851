#include "otlp_receiver.h"

#include <zlib.h>

#include <algorithm>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <stdexcept>

namespace sightline::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct OtlpReceiver::Net {
  net::io_context io;
  tcp::acceptor acceptor{io};
};

namespace {

std::string Gunzip(const std::string& in) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw std::runtime_error("inflateInit2");
  std::string out;
  char buf[65536];
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  int rc = Z_OK;
  while (rc == Z_OK) {
    z.next_out = reinterpret_cast<Bytef*>(buf);
    z.avail_out = sizeof(buf);
    rc = inflate(&z, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - z.avail_out);
  }
  inflateEnd(&z);
  if (rc != Z_STREAM_END) throw std::runtime_error("bad gzip body");
  return out;
}

}  // namespace

OtlpReceiver::OtlpReceiver() : net_(std::make_unique<Net>()) {
  tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  net_->acceptor.open(ep.protocol());
  net_->acceptor.bind(ep);
  net_->acceptor.listen();
  port_ = net_->acceptor.local_endpoint().port();
  thread_ = std::thread([this] { Serve(); });
}

OtlpReceiver::~OtlpReceiver() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = released_ = true;
  }
  changed_.notify_all();
  // Wakes the blocking accept.
  try {
    net::io_context io;
    tcp::socket s(io);
    s.connect(
        tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)));
  } catch (...) {
  }
  thread_.join();
}

void OtlpReceiver::Serve() {
  while (true) {
    tcp::socket socket(net_->io);
    beast::error_code ec;
    net_->acceptor.accept(socket, ec);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (ec) continue;
    beast::flat_buffer buffer;
    http::request<http::string_body> req;
    http::read(socket, buffer, req, ec);
    if (ec) continue;
    Answer a;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ++posts_;
      last_headers_.clear();
      for (const auto& f : req) {
        std::string name(f.name_string());
        std::transform(name.begin(), name.end(), name.begin(), ::tolower);
        last_headers_[name] = std::string(f.value());
      }
      a = answer_;
      holding_ = a.hold;
      changed_.notify_all();
      if (a.hold) changed_.wait(lock, [&] { return released_; });
      holding_ = false;
      if (a.delay_seconds > 0)
        changed_.wait_for(lock, std::chrono::duration<double>(a.delay_seconds),
                          [&] { return stopping_; });
      if (a.status >= 200 && a.status < 300) {
        // A body that does not decode is answered 400 and counted (bad_bodies()).
        try {
          std::string body = req.body();
          if (req[http::field::content_encoding] == "gzip") body = Gunzip(body);
          ExportRequest decoded;
          if (!decoded.ParseFromString(body)) throw std::runtime_error("undecodable OTLP body");
          accepted_.push_back(std::move(decoded));
        } catch (const std::exception&) {
          ++bad_bodies_;
          a.status = 400;
        }
      }
      changed_.notify_all();
    }
    http::response<http::string_body> res{static_cast<http::status>(a.status), 11};
    res.set(http::field::content_type, "application/x-protobuf");
    if (!a.retry_after.empty()) res.set(http::field::retry_after, a.retry_after);
    res.prepare_payload();  // an empty ExportTraceServiceResponse: all accepted
    http::write(socket, res, ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }
}

void OtlpReceiver::set_answer(Answer a) {
  std::lock_guard<std::mutex> lock(mu_);
  answer_ = a;
}

void OtlpReceiver::Release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
  }
  changed_.notify_all();
}

std::size_t OtlpReceiver::posts() {
  std::lock_guard<std::mutex> lock(mu_);
  return posts_;
}

std::vector<OtlpReceiver::ExportRequest> OtlpReceiver::accepted() {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

std::vector<OtlpReceiver::Span> OtlpReceiver::spans() {
  std::vector<Span> out;
  for (const ExportRequest& r : accepted())
    for (const auto& rs : r.resource_spans())
      for (const auto& ss : rs.scope_spans())
        for (const Span& s : ss.spans()) out.push_back(s);
  return out;
}

std::map<std::string, std::string> OtlpReceiver::last_headers() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_headers_;
}

std::size_t OtlpReceiver::bad_bodies() {
  std::lock_guard<std::mutex> lock(mu_);
  return bad_bodies_;
}

bool OtlpReceiver::holding() {
  std::lock_guard<std::mutex> lock(mu_);
  return holding_;
}

bool OtlpReceiver::WaitForSpans(std::size_t n, double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
    std::size_t count = 0;
    for (const ExportRequest& r : accepted_)
      for (const auto& rs : r.resource_spans())
        for (const auto& ss : rs.scope_spans()) count += ss.spans_size();
    return count >= n;
  });
}

bool OtlpReceiver::WaitForPosts(std::size_t n, double seconds) {
  std::unique_lock<std::mutex> lock(mu_);
  return changed_.wait_for(lock, std::chrono::duration<double>(seconds),
                           [&] { return posts_ >= n; });
}

}  // namespace sightline::testing
